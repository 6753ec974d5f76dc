package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"
)

// Paging caps (docs/api.md, "Paging"). MaxOffset bounds how deep a list
// can be paged: far past any list a client pages through (exports use
// CSV), and small enough that offset+limit and page*limit never overflow
// nor reach ClickHouse as a negative OFFSET.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxOffset    = 10_000_000
)

// paging says how a list route pages.
type paging struct {
	defaultLimit, maxLimit int
	byPage                 bool // limit/page (from 1) instead of limit/offset
}

var (
	offsetPaging   = paging{defaultLimit: DefaultLimit, maxLimit: MaxLimit}
	activityPaging = paging{defaultLimit: 10, maxLimit: 100, byPage: true}
)

// window is the page a list request asks for; Offset is set in both
// styles.
type window struct {
	paging
	Limit, Offset, Page int
	HasLimit            bool // limit was given
}

func pathVar(r *http.Request, name string) string { return mux.Vars(r)[name] }

func parseID(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }

// paginate reads limit and offset (or page) within the documented caps;
// anything else, including values past 2^63, is a 400 naming the field.
func paginate(q url.Values, p paging) (window, error) {
	w := window{paging: p, Limit: p.defaultLimit, Page: 1}
	var err error
	if v := q.Get("limit"); v != "" {
		if w.Limit, err = boundedInt("limit", v, 1, p.maxLimit); err != nil {
			return window{}, err
		}
		w.HasLimit = true
	}
	if p.byPage {
		if v := q.Get("page"); v != "" {
			if w.Page, err = boundedInt("page", v, 1, MaxOffset/p.maxLimit+1); err != nil {
				return window{}, err
			}
		}
		w.Offset = (w.Page - 1) * w.Limit
		return w, nil
	}
	if v := q.Get("offset"); v != "" {
		if w.Offset, err = boundedInt("offset", v, 0, MaxOffset); err != nil {
			return window{}, err
		}
	}
	return w, nil
}

// boundedInt parses a decimal integer in [lo, hi].
func boundedInt(field, v string, lo, hi int) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return 0, invalid(field, fmt.Sprintf("%s must be an integer from %d to %d.", field, lo, hi))
	}
	return int(n), nil
}

// bounds is the window's part of a list of n items, for lists held in
// memory.
func (w window) bounds(n int) (start, end int) {
	return min(w.Offset, n), min(w.Offset+w.Limit, n)
}

// envelope is the paginated list body.
type envelope struct {
	Count    uint64  `json:"count"`
	Next     *string `json:"next"`
	Previous *string `json:"previous"`
	Results  any     `json:"results"`
}

// writePage answers the window of a list held in memory, each item
// converted by conv.
func writePage[T, J any](a *API, w http.ResponseWriter, r *http.Request, win window, all []T, conv func(T) J) {
	start, end := win.bounds(len(all))
	results := make([]J, 0, end-start)
	for _, x := range all[start:end] {
		results = append(results, conv(x))
	}
	next, prev := a.pageLinks(r, win, uint64(len(all)))
	writeJSON(w, http.StatusOK, envelope{Count: uint64(len(all)), Next: next, Previous: prev, Results: results})
}

// pageLinks returns absolute next/previous URLs keeping every other query
// parameter; next only when more results exist, previous only past the
// first page (offset 0 or page 1 is written out).
func (a *API) pageLinks(r *http.Request, win window, total uint64) (next, prev *string) {
	link := func(name string, value int) *string {
		u := a.absolute(r)
		q := r.URL.Query()
		q.Set("limit", strconv.Itoa(win.Limit))
		q.Set(name, strconv.Itoa(value))
		u.RawQuery = q.Encode()
		s := u.String()
		return &s
	}
	more, back := uint64(win.Offset+win.Limit) < total, win.Offset > 0
	switch {
	case win.byPage:
		if more {
			next = link("page", win.Page+1)
		}
		if back {
			prev = link("page", win.Page-1)
		}
	default:
		if more {
			next = link("offset", win.Offset+win.Limit)
		}
		if back {
			prev = link("offset", max(win.Offset-win.Limit, 0))
		}
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
