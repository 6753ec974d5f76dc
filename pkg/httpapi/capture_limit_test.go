package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/capture"
)

// TestBatchOverTheLimit: /batch/ over capture's body limit (20 MiB) answers
// 413 in the error shape, whether the length is declared or the body is
// chunked, to a client that sends the whole body before reading (as
// Python's and curl's HTTP clients without Expect do), and to one that
// reads while it sends (Go's) even far beyond what the server drains.
func TestBatchOverTheLimit(t *testing.T) {
	settings := Settings{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: time.Minute, BodyConcurrency: 4, BodyWait: 10 * time.Second, MetricsAddr: "unused"}
	f := newFullAPIServer(t, Config{}, capture.Config{}, &settings)
	limit := int(capture.DefaultMaxRequestBytes)
	body := func(n int) []byte {
		head := `{"api_key":"` + f.projectA.APIToken + `","batch":[{"event":"e","distinct_id":"a","properties":{"x":"`
		tail := `"}}]}`
		return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
	}
	addr := strings.TrimPrefix(f.url, "http://")
	for _, c := range []struct {
		size    int
		chunked bool
	}{
		{limit + 1, false},
		{limit + 1<<20, false},
		{limit + 15<<20, false},
		{limit + 1, true},
		{limit + 10<<20, true},
	} {
		name := fmt.Sprintf("%d bytes, chunked %v, sent whole before reading", c.size, c.chunked)
		res := sendWhole(t, addr, "/batch/", body(c.size), c.chunked)
		wantTooLarge(t, name, res)
	}
	// Far beyond what the server drains: the answer comes before the body
	// is read, for a client that reads while it sends.
	for _, size := range []int{limit + 40<<20, 100 << 20} {
		req, _ := http.NewRequest("POST", f.url+"/batch/", bytes.NewReader(body(size)))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		r := response{status: res.StatusCode, header: res.Header, body: readBody(t, res)}
		wantTooLarge(t, fmt.Sprintf("%d bytes, Go's client", size), r)
	}
}

func wantTooLarge(t *testing.T, name string, r response) {
	t.Helper()
	if r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%s: status %d, body %.300s", name, r.status, r.body)
	}
	m := wantError(t, r, 413, "validation_error", "payload_too_large")
	if m["attr"] != "body" || m["detail"] != "The request body is larger than 20 MiB." {
		t.Fatalf("%s: %s", name, r.body)
	}
}

// sendWhole writes a POST with the whole body on a new connection, then
// reads the answer: a connection reset fails the test.
func sendWhole(t *testing.T, addr, path string, body []byte, chunked bool) response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	u := &url.URL{Scheme: "http", Host: addr, Path: path}
	req, _ := http.NewRequest("POST", u.String(), bytes.NewReader(body))
	if chunked {
		req, _ = http.NewRequest("POST", u.String(), io.MultiReader(bytes.NewReader(body)))
	}
	req.Header.Set("Content-Type", "application/json")
	w := bufio.NewWriterSize(conn, 64<<10)
	if err := req.Write(w); err != nil {
		t.Fatalf("sending %d bytes (chunked %v): %v", len(body), chunked, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("sending %d bytes (chunked %v): %v", len(body), chunked, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("reading the answer to %d bytes (chunked %v): %v", len(body), chunked, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: readBody(t, res)}
}
