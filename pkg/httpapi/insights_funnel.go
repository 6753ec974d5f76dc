package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/personhub/personhub/pkg/insight"
)

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
	q, err := actorBodyParams(r)
	if err != nil {
		return err
	}
	if q.Get("funnel_correlation_person_entity") != "" {
		return a.serveCorrelation(w, r, q)
	}
	fs, _ := a.funnels()
	return a.serveActorsOf(w, r, actorParams{q: q}, fullEnvelope, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return fs.Funnel(r.Context(), p, f, q, page)
	})
}

// personsFunnelCorrelation answers GET|POST /persons/funnel/correlation/,
// paged by funnel_correlation_person_limit and _offset.
func (a *API) personsFunnelCorrelation(w http.ResponseWriter, r *http.Request) error {
	q, err := actorBodyParams(r)
	if err != nil {
		return err
	}
	return a.serveCorrelation(w, r, q)
}

func (a *API) serveCorrelation(w http.ResponseWriter, r *http.Request, q url.Values) error {
	fs, _ := a.funnels()
	p := actorParams{q: q, limit: "funnel_correlation_person_limit", offset: "funnel_correlation_person_offset"}
	return a.serveActorsOf(w, r, p, fullEnvelope, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return fs.FunnelCorrelation(r.Context(), p, f, q, page)
	})
}
