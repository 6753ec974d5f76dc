package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestClientIP: the peer is the client unless it is a trusted proxy; then
// X-Forwarded-For is walked from the right past the trusted proxies, and
// an entry that does not parse ends the walk.
func TestClientIP(t *testing.T) {
	trusted, err := ParseTrustedProxies(" 127.0.0.0/8, ::1 ,10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"direct", "203.0.113.9:5123", nil, "203.0.113.9"},
		{"untrusted peer's header ignored", "203.0.113.9:5123", []string{"198.51.100.1"}, "203.0.113.9"},
		{"one proxy", "127.0.0.1:40000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"v6 proxy", "[::1]:40000", []string{"2001:db8::7"}, "2001:db8::7"},
		{"forged left part skipped", "127.0.0.1:40000", []string{"1.1.1.1, 198.51.100.1, 10.2.3.4"}, "198.51.100.1"},
		{"headers in order", "127.0.0.1:40000", []string{"1.1.1.1", "198.51.100.1,10.2.3.4"}, "198.51.100.1"},
		{"all trusted: the leftmost", "127.0.0.1:40000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"garbage stops the walk", "127.0.0.1:40000", []string{"1.1.1.1, unknown, 10.0.0.5"}, "10.0.0.5"},
		{"port and brackets", "127.0.0.1:40000", []string{"[2001:db8::9]:443"}, "2001:db8::9"},
		{"v4-mapped", "[::ffff:127.0.0.1]:40000", []string{"::ffff:198.51.100.4"}, "198.51.100.4"},
		{"no header", "127.0.0.1:40000", nil, "127.0.0.1"},
		{"unparsable peer", "pipe", []string{"198.51.100.1"}, ""},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		for _, h := range c.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		if got := clientIP(r, trusted); got != c.want {
			t.Errorf("%s: clientIP = %q, want %q", c.name, got, c.want)
		}
	}
	if got := clientIP(&http.Request{RemoteAddr: "127.0.0.1:1", Header: http.Header{"X-Forwarded-For": {"198.51.100.1"}}}, nil); got != "127.0.0.1" {
		t.Errorf("no trusted proxies: %q", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.0/8;"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("ParseTrustedProxies(%q) accepted", bad)
		}
	}
	if p, err := ParseTrustedProxies(" none "); err != nil || len(p) != 0 {
		t.Errorf("none: %v %v", p, err)
	}
	if p, err := ParseTrustedProxies(DefaultTrustedProxies); err != nil || len(p) != 2 {
		t.Errorf("default: %v %v", p, err)
	}
}

// FuzzClientIP: whatever the peer and the header say, the answer is ""
// or an address the peer or the header wrote, and an untrusted peer is
// never overridden.
func FuzzClientIP(f *testing.F) {
	f.Add("127.0.0.1:1", "198.51.100.1, 10.0.0.1")
	f.Add("[::1]:1", "[2001:db8::1]:80,unknown")
	f.Add("203.0.113.1:9", "1.1.1.1")
	trusted, _ := ParseTrustedProxies("127.0.0.0/8,::1,10.0.0.0/8")
	f.Fuzz(func(t *testing.T, peer, xff string) {
		r := &http.Request{RemoteAddr: peer, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := clientIP(r, trusted)
		if got == "" {
			return
		}
		a, err := netip.ParseAddr(got)
		if err != nil {
			t.Fatalf("clientIP = %q, not an address", got)
		}
		p, ok := parseHostAddr(peer)
		if !ok {
			t.Fatalf("clientIP = %q from an unparsable peer %q", got, peer)
		}
		if !isTrusted(p, trusted) && a != p {
			t.Fatalf("untrusted peer %q overridden by %q", peer, got)
		}
		if a == p {
			return
		}
		for _, e := range strings.Split(xff, ",") {
			if x, ok := parseHostAddr(strings.TrimSpace(e)); ok && x == a {
				return
			}
		}
		t.Fatalf("clientIP = %q is in neither %q nor %q", got, peer, xff)
	})
}
