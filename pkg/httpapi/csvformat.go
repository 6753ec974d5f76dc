package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/personhub/personhub/pkg/csvexport"
)

// bufferedWriter holds a response so it can be converted.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header         { return b.header }
func (b *bufferedWriter) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedWriter) WriteHeader(code int)        { b.status = code }

// csvFormat gives every persons route format=csv (or Accept: text/csv):
// a successful JSON answer is rendered as CSV, its `results` (or `result`)
// list as rows, or the object itself as one row. Routes that stream CSV
// themselves (list, retrieve) answer text/csv and pass through; errors stay
// JSON.
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
		buf := &bufferedWriter{header: http.Header{}, status: http.StatusOK}
		next.ServeHTTP(buf, r)
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		if buf.status >= 300 || !strings.HasPrefix(buf.header.Get("Content-Type"), "application/json") {
			w.WriteHeader(buf.status)
			_, err := w.Write(buf.body.Bytes())
			return err
		}
		var v any
		dec := json.NewDecoder(&buf.body)
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
		w.WriteHeader(buf.status)
		_, err = out.WriteTo(w)
		return err
	})
}
