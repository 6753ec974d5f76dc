package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/capture"
)

// TestPagingCaps: every list route refuses paging values past the caps
// (near 2^63, past 2^64, negative, not decimal) with a 400 naming the
// field, and answers at the caps.
func TestPagingCaps(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{})
	seed(f.env)
	p := fmt.Sprintf("/api/projects/%d/", f.projectA.ID)
	org := "/api/organizations/" + f.projectA.OrganizationID + "/pipeline_transformations/"
	offsetLists := []string{"/api/projects/", p + "persons/", p + "persons/?format=csv", p + "plugin_configs/", org}
	pageLists := []string{p + "persons/activity/", p + "persons/1/activity/", org + "activity/"}
	hostile := []string{"9223372036854775807", "18446744073709551616", "-1", "99999999999999999999999999", "1e3", "0x10", " 1"}
	checked := 0
	try := func(path, field, value string, status int) {
		t.Helper()
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		r := f.get(f.keyAll, path+sep+field+"="+value)
		if status == 400 {
			if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != field {
				t.Fatalf("%s %s=%s: attr %v", path, field, value, m["attr"])
			}
		} else if r.status != status {
			t.Fatalf("%s %s=%s: %d %s", path, field, value, r.status, r.body)
		}
		checked++
	}
	for _, path := range offsetLists {
		for _, v := range hostile {
			try(path, "offset", strings.ReplaceAll(v, " ", "%20"), 400)
			try(path, "limit", strings.ReplaceAll(v, " ", "%20"), 400)
		}
		try(path, "offset", strconv.Itoa(MaxOffset+1), 400)
		try(path, "limit", strconv.Itoa(MaxLimit+1), 400)
		try(path, "offset", strconv.Itoa(MaxOffset), 200)
		try(path, "limit", strconv.Itoa(MaxLimit), 200)
	}
	for _, path := range pageLists {
		for _, v := range append(hostile, "0") {
			try(path, "page", strings.ReplaceAll(v, " ", "%20"), 400)
			try(path, "limit", strings.ReplaceAll(v, " ", "%20"), 400)
		}
		try(path, "page", strconv.Itoa(MaxOffset/activityPaging.maxLimit+2), 400)
		try(path, "page", strconv.Itoa(MaxOffset/activityPaging.maxLimit+1), 200)
	}
	t.Logf("paging: %d list routes, %d hostile requests, all 400 naming the field; caps answered 200", len(offsetLists)+len(pageLists), checked)
}

// TestBodyIsExactlyOneJSONValue: trailing data after the body's value is
// a 400 and changes nothing, on every route family that takes a body.
func TestBodyIsExactlyOneJSONValue(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{})
	seed(f.env)
	f.startIngester()
	path, before := f.personPath("p1")
	org := "/api/organizations/" + f.projectA.OrganizationID + "/pipeline_transformations/"
	configs := fmt.Sprintf("/api/projects/%d/plugin_configs/", f.projectA.ID)
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", path, `{"properties":{"hacked":1}}}`},
		{"PATCH", path, `{"properties":{"hacked":1}}]`},
		{"PATCH", path, `{"properties":{"hacked":1}} {"properties":{}}`},
		{"POST", path + "update_property/", `{"key":"hacked","value":1}x`},
		{"POST", org, `{"plugin_type":"source","name":"x"}}`},
		{"POST", configs, `{"plugin":1}]`},
		{"PATCH", configs + "1/", `{"enabled":true}}`},
	} {
		r := f.send(c.method, f.keyAll, c.path, c.body)
		if m := wantError(t, r, 400, "validation_error", "invalid_input"); m["attr"] != "body" {
			t.Fatalf("%s %s %s: %s", c.method, c.path, c.body, r.body)
		}
	}
	if _, after := f.personPath("p1"); fmt.Sprint(after["properties"]) != fmt.Sprint(before["properties"]) {
		t.Fatalf("person changed: %v -> %v", before["properties"], after["properties"])
	}
	for _, list := range []string{org, configs} {
		if m := f.get(f.keyAll, list).json(t); m["count"].(float64) != 0 {
			t.Fatalf("%s: something was created: %v", list, m)
		}
	}
}

// TestBodyOverTheLimit: a body over its family's limit is the same 413
// everywhere, and a real client sending 10 MB reads that answer rather
// than a connection reset, with or without a declared length.
func TestBodyOverTheLimit(t *testing.T) {
	f := newFullAPI(t, Config{}, capture.Config{MaxRequestBytes: 256 << 10})
	seed(f.env)
	path := fmt.Sprintf("/api/projects/%d/persons/1/", f.projectA.ID)
	org := "/api/organizations/" + f.projectA.OrganizationID + "/pipeline_transformations/"
	configs := fmt.Sprintf("/api/projects/%d/plugin_configs/", f.projectA.ID)
	token := f.projectA.APIToken
	big := func(n int) string { return `{"properties":{"x":"` + strings.Repeat("x", n) + `"}}` }
	for _, c := range []struct {
		method, path, body string
		chunked            bool
	}{
		{"PATCH", path, big(10 << 20), false},
		{"PATCH", path, big(10 << 20), true},
		{"PATCH", path, big(1 << 20), false},
		{"POST", path + "split/", big(2 << 20), true},
		{"POST", org, big(3 << 20), false},
		{"POST", configs, big(600 << 10), true},
		{"POST", "/batch/", `{"api_key":"` + token + `","batch":[` + big(300<<10) + `]}`, false},
		{"POST", "/batch/", `{"api_key":"` + token + `","batch":[` + big(300<<10) + `]}`, true},
	} {
		var body = strings.NewReader(c.body)
		req, _ := http.NewRequest(c.method, f.url+c.path, body)
		if c.chunked {
			req, _ = http.NewRequest(c.method, f.url+c.path, struct{ *strings.Reader }{body}) // no length: chunked
		}
		req.Header.Set("Authorization", "Bearer "+f.keyAll)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s (%d bytes, chunked %v): %v", c.method, c.path, len(c.body), c.chunked, err)
		}
		r := response{status: res.StatusCode, header: res.Header}
		r.body = readBody(t, res)
		if m := wantError(t, r, 413, "validation_error", "payload_too_large"); m["attr"] != "body" {
			t.Fatalf("%s %s: %s", c.method, c.path, r.body)
		}
	}
}

func readBody(t *testing.T, res *http.Response) []byte {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// TestRateLimitPerKey: a key past its budget gets PostHog's 429 with
// Retry-After; another key is not affected.
func TestRateLimitPerKey(t *testing.T) {
	f := newFullAPI(t, Config{RateLimit: RateLimit{PerMinute: 3, PerHour: 100}}, capture.Config{})
	path := fmt.Sprintf("/api/projects/%d/persons/", f.projectA.ID)
	for i := range 3 {
		if r := f.get(f.keyAll, path); r.status != 200 {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	r := f.get(f.keyAll, path)
	m := wantError(t, r, 429, "throttled_error", "throttled")
	after, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if after < 1 || after > 20 || m["detail"] != "Request was throttled. Expected available in "+r.header.Get("Retry-After")+" seconds." {
		t.Fatalf("Retry-After %q, detail %v", r.header.Get("Retry-After"), m["detail"])
	}
	if r := f.get(f.keyRead, path); r.status != 200 {
		t.Fatalf("another key: %d %s", r.status, r.body)
	}
	// Refused requests take nothing: after the wait one more passes.
	l := newKeyLimiter(RateLimit{PerMinute: 3, PerHour: 4})
	now := time.Now()
	for i := range 3 {
		if err := l.allow("k", now); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	for range 5 {
		if l.allow("k", now) == nil {
			t.Fatal("burst exceeded")
		}
	}
	if err := l.allow("k", now.Add(20*time.Second)); err != nil {
		t.Fatalf("after 20s: %v", err)
	}
	// The hour's budget (4) is now spent although the minute refilled.
	err := l.allow("k", now.Add(80*time.Second))
	if e, ok := err.(*Error); !ok || e.Status != 429 || e.RetryAfter < 800 {
		t.Fatalf("sustained: %v", err)
	}
}

// TestReadyzFollowsNATS: /readyz answers 503 with Retry-After once the
// ready check fails, here when NATS is gone, as the binaries' check
// (process.Readiness, tested there) fails.
func TestReadyzFollowsNATS(t *testing.T) {
	e := newEnv(t)
	a, _ := bareAPI(t, Config{})
	a.ready = func(ctx context.Context) error {
		if !e.nats.Conn.IsConnected() {
			return errors.New("nats disconnected")
		}
		return e.store.Ping(ctx)
	}
	h := a.Handler()
	get := func() response {
		rec := newRecorder()
		h.ServeHTTP(rec, httpRequest("GET", "/readyz"))
		return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	}
	if r := get(); r.status != 200 {
		t.Fatalf("ready: %d %s", r.status, r.body)
	}
	e.nats.Server.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := get()
		if r.status == 503 {
			wantError(t, r, 503, "server_error", "unavailable")
			if r.header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d with NATS down", r.status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
