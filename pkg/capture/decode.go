package capture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// Request is one capture request as received over HTTP.
type Request struct {
	Query           url.Values
	ContentType     string
	ContentEncoding string
	Body            io.Reader // may be nil (GET)
	// Length is the body's announced length (Content-Length), or <= 0
	// when unknown: the buffer it is read into is sized by it.
	Length int64
	// DefaultEvent names events that arrive without a name ("" refuses
	// them); /engage/ people updates use "$set".
	DefaultEvent string
	// ClientIP is the sender's address ("" unknown): the events' $ip
	// unless they carry their own (see withClientIP).
	ClientIP string
}

// Batch is a decoded request: the project token it carries, when the
// client says it sent it, and its events in order.
type Batch struct {
	Token        string
	SentAt       time.Time // zero when the request does not say
	DefaultEvent string
	ClientIP     string
	Events       []Raw

	bufs     *decodeBuffers // where borrowed buffers go back; nil: nowhere
	borrowed []*[]byte
	raws     []Raw // Events' backing array, to give back
}

// Raw is one event as the client sent it. Values keep their exact JSON
// text.
type Raw struct {
	JSON   json.RawMessage
	Fields Fields
	// properties, decoded on first use: server-side libraries put what
	// capture needs at the top level, so their properties are decoded
	// only once, by the validation.
	properties map[string]json.RawMessage
	decoded    bool
}

// Fields are the top-level fields capture reads; others are dropped.
type Fields struct {
	Event       json.RawMessage `json:"event"`
	DistinctID  json.RawMessage `json:"distinct_id"`
	DollarID    json.RawMessage `json:"$distinct_id"`
	UUID        json.RawMessage `json:"uuid"`
	Timestamp   json.RawMessage `json:"timestamp"`
	Offset      json.RawMessage `json:"offset"`
	Properties  json.RawMessage `json:"properties"`
	Set         json.RawMessage `json:"$set"`
	SetOnce     json.RawMessage `json:"$set_once"`
	Unset       json.RawMessage `json:"$unset"`
	APIKey      json.RawMessage `json:"api_key"`
	Token       json.RawMessage `json:"token"`
	DollarToken json.RawMessage `json:"$token"`
}

// Property returns a property's JSON text, or nil when it is absent (or
// properties is not an object, which validation refuses).
func (r *Raw) Property(name string) json.RawMessage {
	if !r.decoded {
		r.decoded = true
		if p := r.Fields.Properties; !isNull(p) {
			_ = json.Unmarshal(p, &r.properties)
		}
	}
	return r.properties[name]
}

// Decode reads a request body in any of the libraries' encodings (see
// docs/capture.md) and returns its events. It does not validate them
// beyond their being JSON objects: see Publisher.Capture.
func Decode(req Request, maxBytes int64) (*Batch, error) {
	return decode(req, maxBytes, nil)
}

// decode is Decode reading the body into buffers borrowed from bufs (nil:
// allocated), which the batch gives back (Batch.release).
func decode(req Request, maxBytes int64, bufs *decodeBuffers) (*Batch, error) {
	b := &Batch{DefaultEvent: req.DefaultEvent, ClientIP: req.ClientIP, bufs: bufs}
	if err := b.decode(req, maxBytes); err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

func (b *Batch) decode(req Request, maxBytes int64) error {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRequestBytes
	}
	body, err := b.readLimited(req.Body, req.Length, maxBytes)
	if err != nil {
		return err
	}
	compression := strings.ToLower(req.Query.Get("compression"))

	// The transport: gzip, by its magic bytes whatever the headers say
	// (the browser library sends gzip as text/plain, with or without
	// compression=gzip-js in the query).
	switch {
	case isGzip(body):
		if body, err = b.gunzip(body, maxBytes); err != nil {
			return err
		}
	case strings.EqualFold(strings.TrimSpace(req.ContentEncoding), "gzip"):
		return requestError(Malformed, "Content-Encoding is gzip but the body is not gzip data")
	}

	// A form body (data=...&compression=...), or GET ?data=...
	var form url.Values
	mediaType, _, _ := mime.ParseMediaType(req.ContentType)
	if mediaType == "application/x-www-form-urlencoded" || bytes.HasPrefix(body, []byte("data=")) {
		if form, err = url.ParseQuery(string(body)); err != nil {
			return requestError(Malformed, "form body does not parse: %v", err)
		}
		if !form.Has("data") {
			return requestError(Malformed, "form body has no data field")
		}
		if c := form.Get("compression"); c != "" {
			compression = strings.ToLower(c)
		}
		if body, err = b.decodeData(form.Get("data"), compression, maxBytes); err != nil {
			return err
		}
	} else if len(bytes.TrimSpace(body)) == 0 && req.Query.Has("data") {
		if body, err = b.decodeData(req.Query.Get("data"), compression, maxBytes); err != nil {
			return err
		}
	} else if compression == "lz64" || compression == "base64" {
		if body, err = b.decodeData(string(body), compression, maxBytes); err != nil {
			return err
		}
	}

	top, events, slow, err := split(body, b.borrowRaws())
	if err != nil {
		return err
	}
	b.Token = firstString(top.apiKey, top.token)
	for _, k := range []string{"token", "api_key"} {
		if b.Token == "" {
			b.Token = strings.TrimSpace(req.Query.Get(k))
		}
		if b.Token == "" && form != nil {
			b.Token = strings.TrimSpace(form.Get(k))
		}
	}
	b.SentAt = sentAt(top.sentAt, req.Query.Get("_"))

	if len(events) == 0 {
		return requestError(Malformed, "the request has no events")
	}
	b.Events = events
	if b.bufs != nil {
		b.raws = events // given back on release, grown or not
	}
	eventToken := ""
	for i := range events {
		ev := &b.Events[i]
		if slow[i] {
			if *ev, err = decodeRaw(ev.JSON, i); err != nil {
				return err
			}
		}
		if b.Token != "" {
			continue
		}
		// No token for the request: the events' own must agree.
		t := firstString(ev.Fields.APIKey, ev.Fields.Token, ev.Fields.DollarToken)
		if t == "" {
			t = firstString(ev.Property("token"))
		}
		switch {
		case t == "":
		case eventToken == "":
			eventToken = t
		case t != eventToken:
			return eventError(Malformed, i, "carries a different project token than the events before it")
		}
	}
	if b.Token == "" {
		b.Token = eventToken
	}
	if b.Token == "" {
		return requestError(Unauthorized, "no project token: send the project's api_key (or token) in the body, the query or each event's properties")
	}
	return nil
}

// readLimited reads at most limit bytes and fails with TooLarge past it.
// length, when known, sizes the buffer once (io.ReadAll grows it by
// doubling from 512 bytes: a quarter of a /batch/ request's allocation).
func (b *Batch) readLimited(r io.Reader, length, limit int64) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	size := bytes.MinRead
	if length > 0 && length <= limit {
		size += int(length)
	}
	buf := bytes.NewBuffer(*b.borrow(size))
	_, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	data := buf.Bytes()
	b.keep(data) // grown or not: the buffer to give back
	if err != nil {
		return nil, requestError(Malformed, "reading the body: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, requestError(TooLarge, "the request body is over %d bytes", limit)
	}
	return data, nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// gunzip decompresses at most limit bytes: a small body must not expand
// into gigabytes (a gzip bomb). The reader (its window is ~40 KB) and the
// output buffer are borrowed from the batch's buffers.
func (b *Batch) gunzip(in []byte, limit int64) ([]byte, error) {
	zr, err := b.gzipReader(bytes.NewReader(in))
	if err != nil {
		return nil, requestError(Malformed, "gzip body does not decompress: %v", err)
	}
	defer b.putGzipReader(zr)
	// Compressed JSON is usually 5-10 times smaller.
	buf := bytes.NewBuffer(*b.borrow(int(min(int64(len(in))*8, limit)) + bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(zr, limit+1))
	out := buf.Bytes()
	b.keep(out)
	if err != nil {
		return nil, requestError(Malformed, "gzip body does not decompress: %v", err)
	}
	if int64(len(out)) > limit {
		return nil, requestError(TooLarge, "the request body decompresses to over %d bytes", limit)
	}
	return out, nil
}

// decodeData decodes the data field of a form or query: lz-string base64
// (compression=lz64), plain JSON, or base64 of (possibly gzipped) JSON.
func (b *Batch) decodeData(data, compression string, limit int64) ([]byte, error) {
	// A '+' sent unescaped in a form arrives as a space.
	data = strings.ReplaceAll(strings.TrimSpace(data), " ", "+")
	if compression == "lz64" {
		out, err := decompressLZ64(data, int(limit))
		switch {
		case errors.Is(err, errLZTooLarge):
			return nil, requestError(TooLarge, "the lz64 data decompresses to over %d bytes", limit)
		case err != nil:
			return nil, requestError(Malformed, "%v", err)
		}
		return out, nil
	}
	if strings.HasPrefix(data, "{") || strings.HasPrefix(data, "[") {
		return []byte(data), nil
	}
	clean := strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\t', '=':
			return -1
		case '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, data)
	out, err := base64.RawStdEncoding.DecodeString(clean)
	if err != nil {
		return nil, requestError(Malformed, "data is not base64: %v", err)
	}
	if isGzip(out) {
		return b.gunzip(out, limit)
	}
	return out, nil
}

// split reads the body's JSON (see splitJSON) into its request fields and
// its events; slow[i] says events[i] holds only its JSON, for decodeRaw.
// The scanner reads what it can (scanBody), the reference the rest.
func split(body []byte, room []Raw) (top topFields, events []Raw, slow []bool, err error) {
	trimmed := bytes.TrimSpace(body)
	if top, events, slow, ok := scanBodyInto(trimmed, room); ok {
		return top, events, slow, nil
	}
	top, raws, err := splitJSON(trimmed)
	if err != nil {
		return top, nil, nil, err
	}
	events, slow = make([]Raw, len(raws)), make([]bool, len(raws))
	for i, raw := range raws {
		events[i], slow[i] = Raw{JSON: raw}, true
	}
	return top, events, slow, nil
}

// splitJSON reads the body's JSON by encoding/json, the reference for
// scanBody: {"batch": [...]} with request fields beside the list, a bare
// list of events, or a single event (whose own fields may carry the
// request's token and sent_at).
func splitJSON(trimmed []byte) (top topFields, events []json.RawMessage, err error) {
	if len(trimmed) == 0 {
		return top, nil, requestError(Malformed, "the request body is empty")
	}
	switch trimmed[0] {
	case '[':
		if err := json.Unmarshal(trimmed, &events); err != nil {
			return top, nil, requestError(Malformed, "the body is not a JSON list of events: %v", err)
		}
		return top, events, nil
	case '{':
		// One pass: the request's fields and the batch, if any.
		var req struct {
			Batch  *[]json.RawMessage `json:"batch"`
			APIKey json.RawMessage    `json:"api_key"`
			Token  json.RawMessage    `json:"token"`
			SentAt json.RawMessage    `json:"sent_at"`
		}
		if err := json.Unmarshal(trimmed, &req); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field == "batch" {
				return top, nil, requestError(Malformed, "batch must be a list of events")
			}
			return top, nil, requestError(Malformed, "the body is not JSON: %v", err)
		}
		top = topFields{apiKey: req.APIKey, token: req.Token, sentAt: req.SentAt}
		if req.Batch == nil {
			return top, []json.RawMessage{trimmed}, nil
		}
		return top, *req.Batch, nil
	}
	return top, nil, requestError(Malformed, "the body is not JSON (nor a known encoding of it)")
}

func decodeRaw(raw json.RawMessage, i int) (Raw, error) {
	ev := Raw{JSON: raw}
	if len(raw) == 0 || raw[0] != '{' {
		return Raw{}, eventError(Malformed, i, "is not a JSON object")
	}
	if err := json.Unmarshal(raw, &ev.Fields); err != nil {
		return Raw{}, eventError(Malformed, i, "is not a JSON object")
	}
	return ev, nil
}

// firstString returns the first of the values that is a non-empty JSON
// string, trimmed.
func firstString(values ...json.RawMessage) string {
	for _, v := range values {
		if len(v) == 0 || v[0] != '"' {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// sentAt is when the client sent the request: the body's sent_at, or the
// browser library's _ query parameter (milliseconds since the epoch). A
// value that does not parse is ignored, as PostHog does.
func sentAt(body json.RawMessage, underscore string) time.Time {
	if s := firstString(body); s != "" {
		if t, err := event.ParseTime(s); err == nil {
			return t
		}
	}
	if ms, err := strconv.ParseInt(underscore, 10, 64); err == nil && ms > 0 {
		if t := time.UnixMilli(ms).UTC(); t.Year() >= 1970 && t.Year() <= 2105 {
			return t
		}
	}
	return time.Time{}
}
