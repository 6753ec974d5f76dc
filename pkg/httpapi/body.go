package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Request body limits, one per route family (docs/api.md, "Request
// bodies"); capture's is capture.Config.MaxRequestBytes.
const (
	personBody = 1 << 20   // person writes
	pluginBody = 1 << 20   // pipeline transformations
	sourceBody = 8 << 20   // update_source: JSON-escaped files, each checked once decoded
	configBody = 512 << 10 // plugin configs (JSON)
	// configFormBody: a plugin config create or PATCH as multipart, with
	// attachments (plugin.MaxConfigAttachmentBytes) and room for the form.
	configFormBody = 6 << 20
	analysisBody   = 1 << 20 // the filters of POST actor routes (path, funnel)
	// noBody is the limit of routes that take no body.
	noBody = 64 << 10
	// smallBody: a body of declared length up to this needs no slot: it
	// cannot hold more memory than that, and a complete small request
	// must not wait behind slow large ones.
	smallBody = 64 << 10
	// maxDrain: a body of up to its limit plus this that nobody read
	// whole (over its limit, or refused first) is read to its end and
	// discarded after the answer, so a client that sends its whole body
	// before reading the answer (Python's, curl's without Expect) reads
	// it instead of a connection reset. A body declared larger gets the
	// answer at once and the connection is closed.
	maxDrain = 16 << 20
)

// tooLarge is the one 413 of the API.
func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "validation_error", Code: "payload_too_large",
		Detail: "The request body is larger than " + sizeText(limit) + ".", Attr: attr("body")}
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

var (
	errBodyTimeout = &Error{Status: http.StatusRequestTimeout, Type: "invalid_request", Code: "request_timeout",
		Detail: "The request body did not arrive in time.", Attr: attr("body")}
	errBodyUnreadable = invalid("body", "Could not read the request body.")
	errBodyBusy       = &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable",
		Detail: "Too many request bodies are being received; try again shortly.", RetryAfter: 1}
)

// bodySlots caps the large request bodies being read at once (memory):
// slow senders hold a slot until the server's ReadTimeout cuts them, and
// other large bodies wait at most wait for one, then answer 503.
type bodySlots struct {
	slots chan struct{}
	wait  time.Duration
}

func newBodySlots(n int, wait time.Duration) *bodySlots {
	return &bodySlots{slots: make(chan struct{}, n), wait: wait}
}

func (s *bodySlots) acquire(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errBodyBusy
	}
}

func (s *bodySlots) release() { <-s.slots }

// guardedBody is every request body: limited to its route's size, read
// under a body slot (taken at the first read, given back at the end), its
// failures kept as API errors.
type guardedBody struct {
	inner io.ReadCloser
	ctx   context.Context
	slots *bodySlots
	limit int64
	read  int64
	held  bool
	small bool  // needs no slot (smallBody)
	done  bool  // the body ended (EOF)
	err   error // what stopped reading, returned from then on
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.held && !b.small {
		if err := b.slots.acquire(b.ctx); err != nil {
			return 0, b.fail(err)
		}
		b.held = true
	}
	if room := b.limit + 1 - b.read; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.inner.Read(p)
	b.read += int64(n)
	switch {
	case b.read > b.limit:
		return 0, b.fail(tooLarge(b.limit))
	case errors.Is(err, io.EOF):
		b.done = true
		b.releaseSlot()
		return n, err
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return n, b.fail(errBodyTimeout)
		}
		return n, b.fail(errBodyUnreadable)
	}
	return n, nil
}

func (b *guardedBody) fail(err error) error {
	b.err = err
	b.releaseSlot()
	return err
}

func (b *guardedBody) releaseSlot() {
	if b.held {
		b.held = false
		b.slots.release()
	}
}

func (b *guardedBody) Close() error { return b.inner.Close() }

// finish runs after the handler: the slot is given back, and the rest of
// a body nobody read is discarded, up to limit+maxDrain bytes of body in
// all (what was read counts), so the client, still sending, gets to read
// the answer.
func (b *guardedBody) finish(r *http.Request) {
	b.releaseSlot()
	if b.done || errors.Is(b.err, errBodyTimeout) || errors.Is(b.err, errBodyUnreadable) ||
		r.Header.Get("Expect") != "" || r.ContentLength > b.limit+maxDrain {
		return
	}
	_, _ = io.CopyN(io.Discard, b.inner, b.limit+maxDrain-b.read)
}

// guardBody puts every request body under the guard with the route's
// limit (noBody when it names none). A declared length over the limit is
// refused before anything is read.
func (a *API) guardBody(limit int64, next http.Handler) http.Handler {
	if limit <= 0 {
		limit = noBody
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &guardedBody{inner: r.Body, ctx: r.Context(), slots: a.bodies, limit: limit,
			small: r.ContentLength >= 0 && r.ContentLength <= smallBody}
		if r.ContentLength > limit {
			b.err = tooLarge(limit)
			if r.ContentLength > limit+maxDrain {
				w.Header().Set("Connection", "close") // not worth draining
			}
		}
		r.Body = b
		defer b.finish(r)
		next.ServeHTTP(w, r)
	})
}

// bodyError is the guard's own error when reading the body failed there
// (too large, too slow, no slot), for readers that wrap what they read
// (capture.Decode); otherwise err.
func bodyError(r *http.Request, err error) error {
	if b, ok := r.Body.(*guardedBody); ok && b.err != nil {
		return b.err
	}
	return err
}

// readJSON reads a request body that is exactly one JSON value (nil for an
// empty body): trailing data after the value is a 400, before anything is
// changed.
func readJSON(r *http.Request) ([]byte, error) { return readJSONUpTo(r, -1) }

// readJSONUpTo is readJSON with a limit below the route's (-1: none): a
// longer body is the API's 413 with that limit.
func readJSONUpTo(r *http.Request, limit int64) ([]byte, error) {
	var src io.Reader = r.Body
	if limit >= 0 {
		if r.ContentLength > limit {
			return nil, tooLarge(limit)
		}
		src = io.LimitReader(r.Body, limit+1)
	}
	raw, err := io.ReadAll(src)
	if err != nil {
		return nil, bodyError(r, err)
	}
	if limit >= 0 && int64(len(raw)) > limit {
		return nil, tooLarge(limit)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, invalid("body", "The body must be exactly one JSON value.")
	}
	return raw, nil
}

// readObject reads an optional JSON object body (numbers kept exact); an
// empty body is an empty object.
func readObject(r *http.Request) (map[string]any, error) {
	raw, err := readJSON(r)
	if err != nil {
		return nil, err
	}
	body := map[string]any{}
	if raw == nil {
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || body == nil {
		return nil, invalid("body", "The body must be a JSON object.")
	}
	return body, nil
}
