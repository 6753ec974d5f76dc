package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/controlplane"
)

// Capture is what the capture routes need of the pipeline
// (capture.Publisher).
type Capture interface {
	// Decode reads a request into a batch whose buffers Capture recycles.
	Decode(req capture.Request) (*capture.Batch, error)
	Capture(ctx context.Context, b *capture.Batch, now time.Time) (int, error)
	Project(token string) (controlplane.Project, error)
	MaxRequestBytes() int64
}

// captureEvents serves /capture/, /batch/, /e/, /i/v0/e/ and /track/:
// events in any of the libraries' body formats, answered only after
// JetStream acknowledged all of them.
func (a *API) captureEvents(w http.ResponseWriter, r *http.Request) error {
	return a.captureWith(w, r, "")
}

// captureEngage serves /engage/: people updates, which may come without an
// event name; they become $set events.
func (a *API) captureEngage(w http.ResponseWriter, r *http.Request) error {
	return a.captureWith(w, r, "$set")
}

func (a *API) captureWith(w http.ResponseWriter, r *http.Request, defaultEvent string) error {
	now := time.Now()
	req := captureRequest(r, defaultEvent)
	req.ClientIP = clientIP(r, a.trusted)
	b, err := a.capture.Decode(req)
	if err != nil {
		return a.captureError(bodyError(r, err))
	}
	if _, err := a.capture.Capture(r.Context(), b, now); err != nil {
		return a.captureError(err)
	}
	writeJSON(w, http.StatusOK, map[string]int{"status": 1})
	return nil
}

func captureRequest(r *http.Request, defaultEvent string) capture.Request {
	return capture.Request{
		Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"),
		ContentEncoding: r.Header.Get("Content-Encoding"), Body: r.Body, Length: r.ContentLength, DefaultEvent: defaultEvent,
	}
}

// flags serves /flags/ and /decide/, which the libraries call at start-up
// and for feature flags: this service has none, so the answer is the
// valid "no flags" response (in both the v1 and v2 shapes) with the
// remote configuration below.
func (a *API) flags(w http.ResponseWriter, r *http.Request) error {
	token := firstNonEmpty(r.URL.Query().Get("token"), r.URL.Query().Get("api_key"))
	if token == "" {
		b, err := capture.Decode(captureRequest(r, ""), a.capture.MaxRequestBytes())
		if err != nil {
			return a.captureError(bodyError(r, err))
		}
		token = b.Token
	}
	if _, err := a.capture.Project(token); err != nil {
		return a.captureError(err)
	}
	body := remoteConfig(token)
	body["flags"] = map[string]any{}
	body["featureFlags"] = map[string]any{}
	body["featureFlagPayloads"] = map[string]any{}
	body["errorsWhileComputingFlags"] = false
	body["quotaLimited"] = []string{}
	body["requestId"] = uuid.NewString()
	writeJSON(w, http.StatusOK, body)
	return nil
}

// remoteConfigJSON serves /array/{token}/config, the browser library's
// remote configuration.
func (a *API) remoteConfigJSON(w http.ResponseWriter, r *http.Request) error {
	token := pathVar(r, "token")
	if _, err := a.capture.Project(token); err != nil {
		return errNotFound
	}
	writeJSON(w, http.StatusOK, remoteConfig(token))
	return nil
}

// remoteConfigJS serves /array/{token}/config.js, the same configuration
// as the script the browser library loads first.
func (a *API) remoteConfigJS(w http.ResponseWriter, r *http.Request) error {
	token := pathVar(r, "token")
	if _, err := a.capture.Project(token); err != nil {
		return errNotFound
	}
	cfg, _ := json.Marshal(map[string]any{"config": remoteConfig(token), "siteApps": []any{}})
	key, _ := json.Marshal(token)
	w.Header().Set("Content-Type", "application/javascript")
	_, err := w.Write([]byte("(function(){var c=window._POSTHOG_REMOTE_CONFIG=window._POSTHOG_REMOTE_CONFIG||{};c[" +
		string(key) + "]=" + string(cfg) + ";})();\n"))
	return err
}

// remoteConfig turns off what this service does not serve (session
// recording, surveys, heatmaps, site apps, flags, the extra scripts these
// would load) and says which compressions capture accepts.
func remoteConfig(token string) map[string]any {
	return map[string]any{
		"token":                 token,
		"supportedCompression":  []string{"gzip", "gzip-js"},
		"hasFeatureFlags":       false,
		"sessionRecording":      false,
		"surveys":               false,
		"heatmaps":              false,
		"siteApps":              []any{},
		"capturePerformance":    false,
		"autocaptureExceptions": false,
		"captureDeadClicks":     false,
		"config":                map[string]any{"enable_collect_everything": true},
	}
}

// captureError maps the pipeline's errors to responses; the one place for
// them, as toAPIError is for the rest.
func (a *API) captureError(err error) error {
	var e *capture.Error
	if !errors.As(err, &e) {
		return err
	}
	field := ""
	if e.Index >= 0 {
		field = "batch." + strconv.Itoa(e.Index)
	}
	switch e.Kind {
	case capture.Malformed:
		return &Error{Status: http.StatusBadRequest, Type: "validation_error", Code: "invalid_payload", Detail: e.Error(), Attr: attr(field)}
	case capture.TooLarge:
		if field == "" {
			field = "body" // as the API's other 413s (tooLarge)
		}
		return &Error{Status: http.StatusRequestEntityTooLarge, Type: "validation_error", Code: "payload_too_large", Detail: e.Error(), Attr: attr(field)}
	case capture.Unauthorized:
		return &Error{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
			Detail: "Project API key invalid: " + e.Reason + ". The capture token (phc_...) is in the project's settings."}
	case capture.Unavailable:
		a.log.Warn("capture unavailable", "err", err)
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Detail: e.Reason}
	}
	return err
}

// captureCORS lets browsers on any origin call the capture routes: the
// origin is echoed (with credentials allowed, which "*" would forbid) and
// preflight requests are answered here.
func captureCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if origin := r.Header.Get("Origin"); origin != "" {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
		} else {
			h.Set("Access-Control-Allow-Origin", "*")
		}
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
