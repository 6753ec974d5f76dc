package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
)

// Paging limits for lists.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

func pathVar(r *http.Request, name string) string { return mux.Vars(r)[name] }

func parseID(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// page reads limit and offset. hasLimit reports whether limit was given.
func page(q url.Values) (limit, offset int, hasLimit bool, err error) {
	limit, offset = DefaultLimit, 0
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			return 0, 0, false, invalid("limit", "limit must be a positive integer.")
		}
		if n > MaxLimit {
			return 0, 0, false, invalid("limit", "limit must be at most "+strconv.Itoa(MaxLimit)+".")
		}
		limit, hasLimit = n, true
	}
	if v := q.Get("offset"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return 0, 0, false, invalid("offset", "offset must be a non-negative integer.")
		}
		offset = n
	}
	return limit, offset, hasLimit, nil
}

// envelope is the paginated list body.
type envelope struct {
	Count    uint64  `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  any     `json:"results"`
}

// pageLinks returns absolute next/previous URLs keeping every other query
// parameter; next only when more results exist, previous only past the
// first page (offset 0 is written out).
func (a *API) pageLinks(r *http.Request, limit, offset int, total uint64) (next, prev *string) {
	link := func(off int) *string {
		u := a.absolute(r)
		q := r.URL.Query()
		q.Set("limit", strconv.Itoa(limit))
		q.Set("offset", strconv.Itoa(off))
		u.RawQuery = q.Encode()
		s := u.String()
		return &s
	}
	if uint64(offset+limit) < total {
		next = link(offset + limit)
	}
	if offset > 0 {
		prev = link(max(offset-limit, 0))
	}
	return next, prev
}

// absolute is the request URL as the client reached it: the configured
// public URL when set, else the Host header (and X-Forwarded-Proto).
func (a *API) absolute(r *http.Request) *url.URL {
	u := &url.URL{Path: r.URL.Path}
	if a.publicURL != nil {
		u.Scheme, u.Host = a.publicURL.Scheme, a.publicURL.Host
		u.Path = strings.TrimSuffix(a.publicURL.Path, "/") + r.URL.Path
		return u
	}
	u.Scheme, u.Host = "http", r.Host
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		u.Scheme = "https"
	}
	return u
}

// wantsCSV reports whether the response should be CSV.
func wantsCSV(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "csv":
		return true, nil
	case "json":
		return false, nil
	case "":
		return strings.Contains(r.Header.Get("Accept"), "text/csv"), nil
	default:
		return false, invalid("format", "format must be json or csv.")
	}
}
