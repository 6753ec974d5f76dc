package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/personhub/personhub/pkg/insight"
)

// funnelBody is the body limit of the funnel routes' POST (the same
// parameters as the query string, as JSON).
const funnelBody = 1 << 20

// Funnels is what the funnel routes ask of the analysis queries; the
// insights store (pkg/insight) provides it.
type Funnels interface {
	Funnel(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page) ([]insight.Actor, error)
	FunnelCorrelation(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page) ([]insight.Actor, error)
}

// funnels returns the funnel queries when the insights store has them.
func (a *API) funnels() (Funnels, bool) {
	fs, ok := a.insights.(Funnels)
	return fs, ok
}

// personsFunnel answers GET|POST /persons/funnel/ (docs/analysis.md); a
// request naming funnel_correlation_person_entity is a correlation request,
// as in PostHog.
func (a *API) personsFunnel(w http.ResponseWriter, r *http.Request) error {
	q, err := funnelParams(r)
	if err != nil {
		return err
	}
	if q.Get("funnel_correlation_person_entity") != "" {
		return a.serveCorrelation(w, r, q)
	}
	fs, _ := a.funnels()
	return a.serveActorsOf(w, r, actorParams{q: q, full: true}, false, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return fs.Funnel(r.Context(), p, f, q, page)
	})
}

// personsFunnelCorrelation answers GET|POST /persons/funnel/correlation/,
// paged by funnel_correlation_person_limit and _offset.
func (a *API) personsFunnelCorrelation(w http.ResponseWriter, r *http.Request) error {
	q, err := funnelParams(r)
	if err != nil {
		return err
	}
	return a.serveCorrelation(w, r, q)
}

func (a *API) serveCorrelation(w http.ResponseWriter, r *http.Request, q url.Values) error {
	fs, _ := a.funnels()
	p := actorParams{q: q, limit: "funnel_correlation_person_limit", offset: "funnel_correlation_person_offset", full: true}
	return a.serveActorsOf(w, r, p, false, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return fs.FunnelCorrelation(r.Context(), p, f, q, page)
	})
}

// funnelParams is the query string, with a POST body's fields over it
// (the body wins): strings as they are, other JSON values as JSON text,
// null removing the parameter.
func funnelParams(r *http.Request) (url.Values, error) {
	q := r.URL.Query()
	if r.Method != http.MethodPost {
		return q, nil
	}
	body, err := readObject(r)
	if err != nil {
		return nil, err
	}
	for k, v := range body {
		switch t := v.(type) {
		case nil:
			q.Del(k)
		case string:
			q.Set(k, t)
		case json.Number:
			q.Set(k, t.String())
		default:
			raw, err := json.Marshal(t)
			if err != nil {
				return nil, invalid(k, k+" could not be read.")
			}
			q.Set(k, string(raw))
		}
	}
	return q, nil
}
