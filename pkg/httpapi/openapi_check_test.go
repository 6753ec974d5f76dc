package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	"github.com/pb33f/libopenapi-validator/helpers"
)

// The shared test servers of this package (newEnv, newFullAPI,
// newPluginEnv) answer through checkedHandler: every answer of every test
// is validated against docs/openapi.json, and one the document does not
// describe fails the test that got it. Requests are not validated here
// (many tests send bad ones on purpose); TestOpenAPIWalk validates those.

var docValidator struct {
	once sync.Once
	mu   sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v    validator.Validator
	err  error
}

func openAPIValidator() (validator.Validator, error) {
	docValidator.once.Do(func() {
		raw, err := os.ReadFile(openAPIPath)
		if err != nil {
			docValidator.err = err
			return
		}
		doc, err := libopenapi.NewDocument(raw)
		if err != nil {
			docValidator.err = err
			return
		}
		v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
		if len(errs) > 0 {
			docValidator.err = fmt.Errorf("%v", errs)
			return
		}
		docValidator.v = v
	})
	return docValidator.v, docValidator.err
}

// answerCopy passes an answer through and keeps up to max bytes of it.
type answerCopy struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	max    int
	over   bool
}

func (c *answerCopy) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *answerCopy) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.body.Len()+len(p) > c.max {
		c.over = true
	} else {
		c.body.Write(p)
	}
	return c.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the real writer (Flush, deadlines).
func (c *answerCopy) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// checkedHandler validates each answer of next against the document; the
// mismatches fail t when it ends. Paths the document does not hold (the
// router's 404 and 405) are not checked; a path served without its final
// slash is checked as the path with it.
func checkedHandler(t *testing.T, next http.Handler) http.Handler {
	v, err := openAPIValidator()
	if err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	var mu sync.Mutex
	var mismatches []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mismatches {
			t.Errorf("an answer does not match docs/openapi.json: %s", m)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &answerCopy{ResponseWriter: w, max: 4 << 20}
		next.ServeHTTP(c, r)
		if c.over || c.status == 0 || c.status == 499 {
			return // too long to check, or the client went away
		}
		check := func(path string) (bool, []string) {
			req := r.Clone(r.Context())
			req.URL.Path, req.Body = path, http.NoBody
			res := &http.Response{StatusCode: c.status, Header: w.Header().Clone(), Body: readCloser(c.body.Bytes())}
			docValidator.mu.Lock()
			ok, errs := v.ValidateHttpResponse(req, res)
			docValidator.mu.Unlock()
			if ok {
				return true, nil
			}
			unknownPath := true
			var out []string
			for _, e := range errs {
				if e.ValidationType != helpers.PathValidation {
					unknownPath = false
				}
				out = append(out, e.Message+": "+e.Reason)
			}
			return unknownPath, out
		}
		ok, errs := check(r.URL.Path)
		if ok && errs == nil {
			return
		}
		if ok && !strings.HasSuffix(r.URL.Path, "/") { // only the path was unknown: its twin with the slash
			if ok, errs = check(r.URL.Path + "/"); ok {
				return
			}
		} else if ok {
			return // not a route of the document
		}
		mu.Lock()
		mismatches = append(mismatches, fmt.Sprintf("%s %s answered %d: %s\n%.300s", r.Method, r.URL.RequestURI(), c.status,
			strings.Join(errs, "; "), c.body.String()))
		mu.Unlock()
	})
}

type bytesBody struct{ *bytes.Reader }

func (bytesBody) Close() error { return nil }

func readCloser(b []byte) bytesBody { return bytesBody{bytes.NewReader(b)} }
