package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/event"
)

func gz(t testing.TB, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDecodeEncodings(t *testing.T) {
	one := `{"event":"e","distinct_id":"a","properties":{"token":"phc_1"}}`
	batch := `{"api_key":"phc_1","batch":[{"event":"e","distinct_id":"a"},{"event":"f","distinct_id":"b"}],"sent_at":"2026-01-01T00:00:10Z"}`
	list := `[{"event":"e","properties":{"distinct_id":"a","token":"phc_1"}},{"event":"f","properties":{"distinct_id":"b","token":"phc_1"}}]`
	b64 := base64.StdEncoding.EncodeToString([]byte(list))
	form := func(v url.Values) string { return v.Encode() }
	cases := []struct {
		name     string
		req      Request
		body     string
		events   int
		sentAtMS int64
		token    string // default phc_1
	}{
		{name: "single event", body: one, events: 1},
		{name: "batch", body: batch, events: 2, sentAtMS: 1767225610000},
		{name: "bare list", body: list, events: 2},
		{name: "gzip header", req: Request{ContentEncoding: "gzip", ContentType: "application/json"}, body: gz(t, batch), events: 2, sentAtMS: 1767225610000},
		{name: "gzip-js as text/plain", req: Request{ContentType: "text/plain", Query: url.Values{"compression": {"gzip-js"}, "_": {"1767225620000"}}}, body: gz(t, list), events: 2, sentAtMS: 1767225620000},
		{name: "gzip without saying so", body: gz(t, one), events: 1},
		{name: "form base64", req: Request{ContentType: "application/x-www-form-urlencoded", Query: url.Values{"compression": {"base64"}}}, body: form(url.Values{"data": {b64}}), events: 2},
		{name: "form base64, + sent raw", req: Request{ContentType: "application/x-www-form-urlencoded"}, body: "data=" + strings.ReplaceAll(b64, "+", " ") + "&compression=base64", events: 2},
		{name: "form url-safe base64 unpadded", req: Request{ContentType: "application/x-www-form-urlencoded"}, body: form(url.Values{"data": {base64.RawURLEncoding.EncodeToString([]byte(list))}}), events: 2},
		{name: "form plain JSON", req: Request{ContentType: "application/x-www-form-urlencoded"}, body: form(url.Values{"data": {one}}), events: 1},
		{name: "form lz64", req: Request{ContentType: "application/x-www-form-urlencoded"}, body: form(url.Values{"data": {lzVectors[4].lz64}, "compression": {"lz64"}}), events: 1, token: "phc_x"},
		{name: "form without content type", body: form(url.Values{"data": {b64}}), events: 2},
		{name: "GET data", req: Request{Query: url.Values{"data": {b64}}}, events: 2},
		{name: "lz64 body", req: Request{Query: url.Values{"compression": {"lz64"}}}, body: lzVectors[4].lz64, events: 1, token: "phc_x"},
		{name: "base64 body", req: Request{Query: url.Values{"compression": {"base64"}}}, body: b64, events: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			if c.body != "" {
				req.Body = strings.NewReader(c.body)
			}
			b, err := Decode(req, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if c.token == "" {
				c.token = "phc_1"
			}
			if len(b.Events) != c.events || b.Token != c.token {
				t.Fatalf("got %d events, token %q", len(b.Events), b.Token)
			}
			if got := b.SentAt; (c.sentAtMS == 0) != got.IsZero() || (c.sentAtMS != 0 && got.UnixMilli() != c.sentAtMS) {
				t.Fatalf("sent_at %v, want %d", got, c.sentAtMS)
			}
		})
	}
}

func TestDecodeTokens(t *testing.T) {
	cases := []struct {
		query, body, want string
	}{
		{"", `{"api_key":"phc_a","batch":[{"event":"e","distinct_id":"a","properties":{"token":"phc_b"}}]}`, "phc_a"},
		{"", `{"token":"phc_a","batch":[{"event":"e","distinct_id":"a"}]}`, "phc_a"},
		{"token=phc_q", `[{"event":"e","distinct_id":"a"}]`, "phc_q"},
		{"api_key=phc_q", `[{"event":"e","distinct_id":"a"}]`, "phc_q"},
		{"", `[{"event":"e","distinct_id":"a","api_key":"phc_e"},{"event":"e","distinct_id":"a"}]`, "phc_e"},
		{"", `[{"event":"e","distinct_id":"a"},{"event":"e","distinct_id":"a","$token":"phc_m"}]`, "phc_m"},
		{"", `{"event":"e","distinct_id":"a","api_key":" phc_s "}`, "phc_s"},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		b, err := Decode(Request{Query: q, Body: strings.NewReader(c.body)}, 1<<20)
		if err != nil || b.Token != c.want {
			t.Errorf("%s %s: %v %v", c.query, c.body, b, err)
		}
	}
}

func TestDecodeRefusals(t *testing.T) {
	big := `[` + strings.Repeat(`{"event":"e","distinct_id":"a","properties":{"token":"phc_1"}},`, 2000) + `{}]`
	bomb := gz(t, `[`+strings.Repeat(" ", 4<<20)+`]`)
	cases := []struct {
		name  string
		req   Request
		body  string
		kind  Kind
		index int
		want  string
	}{
		{"empty", Request{}, "", Malformed, -1, "empty"},
		{"not JSON", Request{}, "hello", Malformed, -1, "not JSON"},
		{"truncated", Request{}, `[{"event":"e"`, Malformed, -1, "not a JSON list"},
		{"batch not a list", Request{}, `{"api_key":"phc_1","batch":{}}`, Malformed, -1, "batch must be a list"},
		{"no events", Request{}, `{"api_key":"phc_1","batch":[]}`, Malformed, -1, "no events"},
		{"event not an object", Request{}, `{"api_key":"phc_1","batch":[{"event":"e"},"x"]}`, Malformed, 1, "not a JSON object"},
		{"no token", Request{}, `[{"event":"e","distinct_id":"a"}]`, Unauthorized, -1, "no project token"},
		{"two tokens", Request{}, `[{"event":"e","distinct_id":"a","properties":{"token":"phc_1"}},{"event":"e","distinct_id":"a","properties":{"token":"phc_2"}}]`, Malformed, 1, "different project token"},
		{"gzip header, plain body", Request{ContentEncoding: "gzip"}, `[]`, Malformed, -1, "not gzip"},
		{"bad gzip", Request{}, "\x1f\x8b\x08garbage", Malformed, -1, "gzip"},
		{"too large", Request{}, big, TooLarge, -1, "over"},
		{"gzip bomb", Request{}, bomb, TooLarge, -1, "decompresses"},
		{"form without data", Request{ContentType: "application/x-www-form-urlencoded"}, "x=1", Malformed, -1, "no data field"},
		{"bad base64", Request{ContentType: "application/x-www-form-urlencoded"}, "data=%%%", Malformed, -1, "form body"},
		{"bad base64 data", Request{ContentType: "application/x-www-form-urlencoded"}, "data=!!!!", Malformed, -1, "not base64"},
		{"bad lz64", Request{Query: url.Values{"compression": {"lz64"}}}, "!!!!", Malformed, -1, "lz"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.Body = strings.NewReader(c.body)
			_, err := Decode(req, 100_000)
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.kind || e.Index != c.index || !strings.Contains(e.Reason, c.want) {
				t.Fatalf("got %#v, want kind %d index %d %q", err, c.kind, c.index, c.want)
			}
		})
	}
}

// FuzzDecode: any body and query either decode into events that are JSON
// objects with a token, or fail with a capture Error.
func FuzzDecode(f *testing.F) {
	f.Add("", `{"api_key":"phc_1","batch":[{"event":"e","distinct_id":"a"}]}`, "application/json")
	f.Add("compression=gzip-js&_=1767225620000", gz(f, `[{"event":"e","properties":{"token":"t","distinct_id":1}}]`), "text/plain")
	f.Add("compression=lz64", lzVectors[4].lz64, "")
	f.Add("", `{"api_key":"phc_1","batch":[{"event":"e","distinct_id":"a","$set":{"x":1}},{"event":"e","distinct_id":"a","properties":{"$set":{"x":1},"$set_timestamp":"2020-01-01T00:00:00Z"}}]}`, "application/json")
	f.Add("", "data="+base64.StdEncoding.EncodeToString([]byte(`{"event":"e","token":"t"}`)), "application/x-www-form-urlencoded")
	// Buffers recycled from one input to the next, as the publisher's are
	// from one request to the next.
	var bufs decodeBuffers
	now := time.Now()
	f.Fuzz(func(t *testing.T, query, body, contentType string) {
		q, _ := url.ParseQuery(query)
		b, err := Decode(Request{Query: q, Body: strings.NewReader(body), ContentType: contentType}, 1<<16)
		// Decoding into recycled buffers answers exactly the same.
		pooled, perr := decode(Request{Query: q, Body: strings.NewReader(body), ContentType: contentType}, 1<<16, &bufs)
		if fmt.Sprint(err) != fmt.Sprint(perr) {
			t.Fatalf("error %v; into recycled buffers %v", err, perr)
		}
		if err == nil {
			defer pooled.release()
			if b.Token != pooled.Token || !b.SentAt.Equal(pooled.SentAt) || len(b.Events) != len(pooled.Events) {
				t.Fatalf("decoded %q %v %d events; into recycled buffers %q %v %d", b.Token, b.SentAt, len(b.Events), pooled.Token, pooled.SentAt, len(pooled.Events))
			}
			var arena []byte
			for i := range b.Events {
				if !reflect.DeepEqual(b.Events[i].JSON, pooled.Events[i].JSON) || !reflect.DeepEqual(b.Events[i].Fields, pooled.Events[i].Fields) {
					t.Fatalf("event %d: %+v; into recycled buffers %+v", i, b.Events[i], pooled.Events[i])
				}
				env, eerr := envelopeOf(&b.Events[i], i, 1, now, b.SentAt, "")
				var penv Envelope
				penv, arena, perr = appendEnvelope(&pooled.Events[i], i, controlplane.Project{ID: 1}, now, pooled, arena)
				if fmt.Sprint(eerr) != fmt.Sprint(perr) || (env.UUID == penv.UUID && string(env.Data) != string(penv.Data)) {
					t.Fatalf("envelope %d: %s %v; from recycled buffers %s %v", i, env.Data, eerr, penv.Data, perr)
				}
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if b.Token == "" || len(b.Events) == 0 {
			t.Fatalf("decoded without token or events: %+v", b)
		}
		for _, ev := range b.Events {
			if len(ev.JSON) == 0 || ev.JSON[0] != '{' {
				t.Fatalf("event %q is not an object", ev.JSON)
			}
		}
		// What decodes must also be judged without panics; an event
		// accepted is accepted with the client's address too, stored with
		// $ip added (unless it had one) or, anonymized, without one.
		for i := range b.Events {
			plain, err := envelopeOf(&b.Events[i], i, 1, now, b.SentAt, "")
			if err != nil {
				continue
			}
			stored := func(env Envelope) map[string]json.RawMessage {
				ev, err := event.Parse(env.Data)
				if err != nil {
					t.Fatalf("%s: %v", env.Data, err)
				}
				m := map[string]json.RawMessage{}
				if err := json.Unmarshal([]byte(ev.StoredProperties()), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
			want := stored(plain)
			// With timestamped_person_properties, an event with a $set
			// and no $set_timestamp of its own gets "$set_timestamp":true.
			parsed, err := event.Parse(plain.Data)
			if err != nil {
				t.Fatalf("%s: %v", plain.Data, err)
			}
			_, hasStamp := parsed.Properties[event.PropSetTimestamp]
			stamps := len(parsed.Set) > 0 && !hasStamp
			for _, anon := range []bool{false, true} {
				for _, timed := range []bool{false, true} {
					proj := controlplane.Project{ID: 1, AnonymizeIPs: anon, TimestampedPersonProperties: timed}
					env, _, err := appendEnvelope(&b.Events[i], i, proj, now, &Batch{SentAt: b.SentAt, ClientIP: "2001:db8::5"}, nil)
					if err != nil {
						var e *Error
						if errors.As(err, &e) && e.Kind == TooLarge {
							continue
						}
						t.Fatalf("accepted without an address, refused with one (anonymize %v, timestamped %v): %v", anon, timed, err)
					}
					got, w := stored(env), maps.Clone(want)
					switch _, had := w["$ip"]; {
					case anon:
						delete(w, "$ip")
					case !had:
						w["$ip"] = json.RawMessage(`"2001:db8::5"`)
					}
					if timed && stamps {
						w[event.PropSetTimestamp] = json.RawMessage(`true`)
					}
					if fmt.Sprint(got) != fmt.Sprint(w) {
						t.Fatalf("anonymize %v, timestamped %v: stored %s\nwant %s", anon, timed, got, w)
					}
				}
			}
		}
	})
}
