package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/stream"
)

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCaptureFormats sends the same kind of events in every body format
// and on every capture route, and reads the persons back.
func TestCaptureFormats(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	c.startIngester()
	tok := c.projectA.APIToken
	jsonH := http.Header{"Content-Type": {"application/json"}}
	ev := func(id, key string) string {
		return fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set":{%q:true}}`, id, key)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(`[` + ev("f-get", "get") + `]`))
	sends := []struct {
		path, query string
		header      http.Header
		body        string
		id, key     string
	}{
		{"/batch/", "", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, tok, ev("f-batch", "batch")), "f-batch", "batch"},
		{"/batch", "", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, tok, ev("f-noslash", "noslash")), "f-noslash", "noslash"},
		{"/capture/", "", jsonH, fmt.Sprintf(`{"api_key":%q,"event":"e","distinct_id":"f-single","properties":{"$set":{"single":true}}}`, tok), "f-single", "single"},
		{"/e/", "?compression=gzip-js&_=1767225600000", http.Header{"Content-Type": {"text/plain"}},
			gzipped(t, fmt.Sprintf(`[{"event":"e","properties":{"distinct_id":"f-gzipjs","token":%q,"$set":{"gzipjs":true}}}]`, tok)), "f-gzipjs", "gzipjs"},
		{"/i/v0/e/", "", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}},
			gzipped(t, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, tok, ev("f-i", "i"))), "f-i", "i"},
		{"/track/", "?token=" + tok, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			url.Values{"data": {base64.StdEncoding.EncodeToString([]byte(ev("f-form", "form")))}}.Encode(), "f-form", "form"},
		{"/e/", "?compression=lz64&token=" + tok, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
			// lz-string's compressToBase64 (the npm package) of
			// [{"event":"e","properties":{"distinct_id":"f-lz","$set":{"lz":true}}}]
			"data=" + url.QueryEscape("NobwRApgbhB2AuYBckwBowAcBOB7TE28AlhAM7LgAmxZJsAxvAPrFXJgBmAtADYBe6MABIyEREnADk8bAFcIAX2UBdIA"), "f-lz", "lz"},
		{"/engage/", "", jsonH, fmt.Sprintf(`{"$token":%q,"$distinct_id":"f-engage","$set":{"engage":true}}`, tok), "f-engage", "engage"},
	}
	for _, s := range sends {
		r := c.post(s.path+s.query, s.header, s.body)
		if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"status":1}` {
			t.Fatalf("%s%s: %d %s", s.path, s.query, r.status, r.body)
		}
	}
	// GET /e/?data=...
	res, err := http.Get(c.captureURL + "/e/?token=" + tok + "&data=" + url.QueryEscape(b64))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET data: %v %v", res, err)
	}
	res.Body.Close()
	sends = append(sends, struct {
		path, query string
		header      http.Header
		body        string
		id, key     string
	}{id: "f-get", key: "get"})
	for _, s := range sends {
		c.waitPerson(s.id, func(p map[string]any) bool { return personProps(p)[s.key] == true })
	}
}

// TestCaptureRefusals: the status codes, with nothing published for a
// refused request.
func TestCaptureRefusals(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	tok := c.projectA.APIToken
	jsonH := http.Header{"Content-Type": {"application/json"}}
	check := func(name string, r response, status int, code, attr string) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
		m := r.json(t)
		if m["code"] != code || (attr != "" && m["attr"] != attr) {
			t.Fatalf("%s: %s", name, r.body)
		}
	}
	check("unknown token", c.post("/batch/", jsonH, `{"api_key":"phc_nope","batch":[{"event":"e","distinct_id":"a"}]}`), 401, "invalid_api_key", "")
	check("no token", c.post("/batch/", jsonH, `{"batch":[{"event":"e","distinct_id":"a"}]}`), 401, "invalid_api_key", "")
	check("personal key is no capture token", c.post("/batch/", http.Header{"Authorization": {"Bearer " + c.keyAll}}, `{"batch":[{"event":"e","distinct_id":"a"}]}`), 401, "invalid_api_key", "")
	check("not JSON", c.post("/batch/", jsonH, `{"api_key":`), 400, "invalid_payload", "")
	check("second event invalid", c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"a"},{"event":"e"}]}`, tok)), 400, "invalid_payload", "batch.1")
	check("bad timestamp", c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"a","timestamp":"soon"}]}`, tok)), 400, "invalid_payload", "batch.0")
	big := strings.Repeat("x", capture.MaxEventBytes)
	check("event over 1 MiB", c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"a"},{"event":"e","distinct_id":"a","properties":{"x":%q}}]}`, tok, big)), 413, "payload_too_large", "batch.1")
	bomb := gzipped(t, fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"a","properties":{"x":"%s"}}]}`, tok, strings.Repeat("x", capture.DefaultMaxRequestBytes)))
	check("gzip bomb", c.post("/batch/", http.Header{"Content-Encoding": {"gzip"}}, bomb), 413, "payload_too_large", "body")
	if n := c.streamCount(); n != 0 {
		t.Fatalf("refused requests published %d events", n)
	}

	// CORS: preflight, and headers on answers and on errors.
	req, _ := http.NewRequest("OPTIONS", c.captureURL+"/e/", nil)
	req.Header.Set("Origin", "http://shop.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "http://shop.example" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Methods"), "POST") || res.Header.Get("Access-Control-Allow-Headers") != "content-type" {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	for _, body := range []string{`{"api_key":"phc_nope","event":"e","distinct_id":"a"}`, fmt.Sprintf(`{"api_key":%q,"event":"e","distinct_id":"a"}`, tok)} {
		r := c.post("/e/", http.Header{"Origin": {"http://shop.example"}}, body)
		if r.header.Get("Access-Control-Allow-Origin") != "http://shop.example" || r.header.Get("Access-Control-Allow-Credentials") != "true" {
			t.Fatalf("%d without CORS headers: %v", r.status, r.header)
		}
	}

	// JetStream unavailable: 503, and the libraries retry.
	if err := c.nats.JS.DeleteStream(context.Background(), stream.Events); err != nil {
		t.Fatal(err)
	}
	check("no stream", c.post("/batch/", jsonH, fmt.Sprintf(`{"api_key":%q,"batch":[{"event":"e","distinct_id":"a"}]}`, tok)), 503, "unavailable", "")
}

// TestCaptureStartupEndpoints: /flags/, /decide/ and the remote config.
func TestCaptureStartupEndpoints(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{})
	tok := c.projectA.APIToken
	r := c.post("/flags/?v=2&config=true", http.Header{"Content-Type": {"application/json"}}, fmt.Sprintf(`{"token":%q,"distinct_id":"a"}`, tok))
	m := r.json(t)
	if r.status != 200 || fmt.Sprint(m["flags"]) != "map[]" || fmt.Sprint(m["featureFlags"]) != "map[]" || m["errorsWhileComputingFlags"] != false {
		t.Fatalf("flags: %d %s", r.status, r.body)
	}
	r = c.post("/decide/?v=3", http.Header{"Content-Type": {"text/plain"}}, gzipped(t, fmt.Sprintf(`{"token":%q,"distinct_id":"a"}`, tok)))
	if r.status != 200 || fmt.Sprint(r.json(t)["featureFlags"]) != "map[]" {
		t.Fatalf("decide: %d %s", r.status, r.body)
	}
	if r := c.post("/flags/?v=2", nil, `{"token":"phc_nope","distinct_id":"a"}`); r.status != 401 {
		t.Fatalf("flags, unknown token: %d %s", r.status, r.body)
	}
	for path, want := range map[string]string{
		"/array/" + tok + "/config":    `"supportedCompression":["gzip","gzip-js"]`,
		"/array/" + tok + "/config.js": `window._POSTHOG_REMOTE_CONFIG`,
		"/decide/?token=" + tok:        `"featureFlags":{}`,
	} {
		res, err := http.Get(c.captureURL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Fatalf("%s: %d %s", path, res.StatusCode, b.String())
		}
	}
	res, _ := http.Get(c.captureURL + "/array/phc_nope/config")
	if res.StatusCode != 404 {
		t.Fatalf("config of an unknown token: %d", res.StatusCode)
	}
	res.Body.Close()
	if n := c.streamCount(); n != 0 {
		t.Fatalf("start-up endpoints published %d events", n)
	}
}

// TestCaptureClientAddress: an event gets its sender's address as $ip
// unless it carries its own; a header from an untrusted peer is not
// believed; a project with anonymize_ips (set through PATCH) stores no
// address, and drops one a client sends.
func TestCaptureClientAddress(t *testing.T) {
	c := newCaptureEnv(t, capture.Config{}) // no trusted proxies
	c.startIngester()
	send := func(events ...string) {
		t.Helper()
		// The header is a client's own text: the peer is not a trusted proxy.
		h := http.Header{"Content-Type": {"application/json"}, "X-Forwarded-For": {"198.51.100.7"}}
		if r := c.post("/batch/", h, fmt.Sprintf(`{"api_key":%q,"batch":[%s]}`, c.projectA.APIToken, strings.Join(events, ","))); r.status != 200 {
			t.Fatalf("capture: %d %s", r.status, r.body)
		}
	}
	send(`{"event":"peer","distinct_id":"a","properties":{"k":1}}`, `{"event":"own","distinct_id":"a","properties":{"$ip":"203.0.113.5"}}`)

	path := fmt.Sprintf("/api/projects/%d/", c.projectA.ID)
	for _, body := range []string{`{"anonymize_ips":"yes"}`, `{"anonymize_ips":1}`, `{"anonymize_ips":true,"timezone":"Mars/Olympus"}`} {
		if m := wantError(t, c.send("PATCH", c.keyAll, path, body), 400, "validation_error", "invalid_input"); m["attr"] == nil {
			t.Fatalf("%s: no attr", body)
		}
	}
	if got := c.get(c.keyAll, path).json(t)["anonymize_ips"]; got != false {
		t.Fatalf("after refused PATCHes: anonymize_ips %v", got)
	}
	if r := c.send("PATCH", c.keyAll, path, `{"anonymize_ips":true}`); r.status != 200 || r.json(t)["anonymize_ips"] != true {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	send(`{"event":"anon","distinct_id":"a"}`, `{"event":"anon-own","distinct_id":"a","properties":{"$ip":"203.0.113.5","k":2}}`)

	want := []string{`peer a {"$ip":"127.0.0.1","k":1}`, `own a {"$ip":"203.0.113.5"}`, `anon a {}`, `anon-own a {"k":2}`}
	var got []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = storedEvents(t, c.store, c.projectA.ID); len(got) >= len(want) {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stored events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
