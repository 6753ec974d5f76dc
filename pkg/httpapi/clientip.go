package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// DefaultTrustedProxies are the proxies whose X-Forwarded-For capture
// believes by default: the loopback addresses, so that a reverse proxy on
// the same host works as it is, and nothing a remote client can forge.
const DefaultTrustedProxies = "127.0.0.0/8,::1/128"

// ParseTrustedProxies reads a comma-separated list of addresses and CIDR
// prefixes ("10.0.0.0/8, 192.168.1.7"); "" and "none" are none.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	if strings.TrimSpace(s) == "none" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: not an address or CIDR prefix", f)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an address or CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// clientIP is the address of the client that sent r, as capture records
// it in $ip: the connection's peer, unless the peer is a trusted proxy,
// in which case X-Forwarded-For is read from the right (the entries the
// trusted proxies appended) and the first address no trusted proxy holds
// is the client. A malformed entry ends the walk at the last good
// address: what lies left of it is the client's own text and proves
// nothing. "" when the peer's address does not parse (a test's
// RemoteAddr).
func clientIP(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := parseHostAddr(r.RemoteAddr)
	if !ok {
		return ""
	}
	if !isTrusted(peer, trusted) {
		return peer.String()
	}
	client := peer
	headers := r.Header.Values("X-Forwarded-For")
	for h := len(headers) - 1; h >= 0; h-- {
		entries := strings.Split(headers[h], ",")
		for i := len(entries) - 1; i >= 0; i-- {
			a, ok := parseHostAddr(strings.TrimSpace(entries[i]))
			if !ok {
				return client.String()
			}
			client = a
			if !isTrusted(a, trusted) {
				return a.String()
			}
		}
	}
	return client.String()
}

// parseHostAddr reads an address as RemoteAddr and X-Forwarded-For write
// it: "1.2.3.4", "1.2.3.4:5678", "[::1]:5678" or "::1"; a zone is
// dropped and a v4-mapped v6 address becomes v4.
func parseHostAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap().WithZone(""), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
