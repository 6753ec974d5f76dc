package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/personhub/personhub/pkg/csvexport"
)

// csvResponse stands between csvFormat and the route. It decides when the
// route sends its status: a successful JSON answer is held, to be converted
// to CSV (those are one object or one page, bounded by the route's own
// limits); anything else (an error, or CSV the route streams itself, such
// as a whole persons export) goes straight to the client, unbuffered.
type csvResponse struct {
	w       http.ResponseWriter
	decided bool
	convert bool
	status  int
	body    bytes.Buffer
}

func (c *csvResponse) Header() http.Header { return c.w.Header() }

func (c *csvResponse) WriteHeader(code int) {
	if c.decided {
		return
	}
	c.decided, c.status = true, code
	c.convert = code < 300 && strings.HasPrefix(c.w.Header().Get("Content-Type"), "application/json")
	if !c.convert {
		c.w.WriteHeader(code)
	}
}

func (c *csvResponse) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if c.convert {
		return c.body.Write(p)
	}
	return c.w.Write(p)
}

// Unwrap gives http.ResponseController the real writer (Flush, deadlines).
func (c *csvResponse) Unwrap() http.ResponseWriter { return c.w }

// csvFormat gives every persons route format=csv (or Accept: text/csv):
// a successful JSON answer is rendered as CSV, its `results` (or `result`)
// list as rows, or the object itself as one row. Routes that stream CSV
// themselves (list, retrieve) answer text/csv and pass through as they
// write; errors stay JSON.
func (a *API) csvFormat(next http.Handler) http.Handler {
	return a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		csv, err := wantsCSV(r)
		if err != nil {
			return err
		}
		if !csv {
			next.ServeHTTP(w, r)
			return nil
		}
		res := &csvResponse{w: w}
		next.ServeHTTP(res, r)
		if !res.convert {
			return nil
		}
		var v any
		dec := json.NewDecoder(&res.body)
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return err
		}
		rows := []any{v}
		if m, ok := v.(map[string]any); ok {
			for _, key := range []string{"results", "result", "points"} {
				if list, ok := m[key].([]any); ok {
					rows = list
					break
				}
			}
		} else if list, ok := v.([]any); ok {
			rows = list
		}
		out := csvexport.NewWriter()
		defer out.Close()
		for _, row := range rows {
			if err := out.Add(row); err != nil {
				return err
			}
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Del("Content-Length")
		w.WriteHeader(res.status)
		_, err = out.WriteTo(w)
		return err
	})
}
