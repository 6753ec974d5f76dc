package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
)

// statusWriter records the status code for metrics, and whether anything
// was written (a panic after that cannot become a 500).
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// flushes).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// observe counts and times every request by route, and recovers a panic
// in anything below it: logged with its stack, answered with the JSON 500
// on a connection that stays usable. A panic after the answer began
// cannot change its status; the connection is then aborted so the client
// sees a cut answer rather than a complete-looking one.
func (a *API) observe(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			a.requests.WithLabelValues(route, r.Method, strconv.Itoa(sw.status)).Inc()
			a.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
		}()
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
				panic(v)
			}
			a.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if sw.wrote {
				sw.status = http.StatusInternalServerError
				panic(http.ErrAbortHandler)
			}
			a.writeError(sw, r, errInternal)
		}()
		next.ServeHTTP(sw, r)
	})
}

// streaming gives a long answer (a CSV export) a write deadline per chunk
// instead of the server's WriteTimeout for the whole answer: a client
// that reads keeps the export going however long it is; one that stops
// reading is cut after StreamWriteTimeout.
func (a *API) streaming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: a.stream, log: a.log}, r)
	})
}

// deadlineChunk is how much is written under one deadline.
const deadlineChunk = 64 << 10

type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	log     *slog.Logger
	warned  bool
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), deadlineChunk)]
		if err := d.rc.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil && !d.warned {
			d.warned = true // the server's WriteTimeout then bounds the whole answer
			d.log.Warn("cannot set a write deadline", "err", err)
		}
		n, err := d.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// withDeadline bounds the backend calls of a request (their context);
// one that passes it is a 503 (errors.go), answered before the server's
// WriteTimeout would cut the connection.
func withDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
