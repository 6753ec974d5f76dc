package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/csvexport"
	"github.com/personhub/personhub/pkg/insight"
	"github.com/personhub/personhub/pkg/person"
)

// Insights is what the actor routes (docs/analysis.md) ask of the analysis
// queries (pkg/insight).
type Insights interface {
	Trends(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page) ([]insight.Actor, error)
	Stickiness(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page) ([]insight.Actor, error)
	Lifecycle(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page, now time.Time) ([]insight.Actor, error)
	Retention(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page, now time.Time) ([]insight.Actor, error)
	Paths(ctx context.Context, project uint64, f *insight.Filter, q url.Values, page insight.Page) ([]insight.Actor, error)
}

// actorJSON is a person of an actor answer: the persons list's JSON plus
// PostHog's actor fields (reference §1.5); id stays the integer id.
type actorJSON struct {
	Type string `json:"type"`
	person.Person
	MatchedRecordings []any    `json:"matched_recordings"`
	ValueAtDataPoint  *float64 `json:"value_at_data_point"`
	appearances       []int    // retention: in its envelope, not in the actor
}

// actorCSV is a CSV row: the persons list's columns, plus the value on
// trends (§14.7).
type actorCSV struct {
	person.Person
	ValueAtDataPoint *float64 `json:"value_at_data_point,omitempty"`
	Appearances      []int    `json:"appearances,omitempty"` // columns appearances.0, .1, ...
}

type actorPage struct {
	People []actorJSON `json:"people"`
	Count  int         `json:"count"`
}

// trendsEnvelope is the answer of trends (§1.8); no cache, so is_cached
// is false and last_refresh is now.
type trendsEnvelope struct {
	Results        []actorPage `json:"results"`
	Next           *string     `json:"next"`
	Initial        string      `json:"initial"`
	MissingPersons int         `json:"missing_persons"`
	IsCached       bool        `json:"is_cached"`
	LastRefresh    string      `json:"last_refresh"`
}

type actorsEnvelope struct {
	Results []actorPage `json:"results"`
	Next    *string     `json:"next"`
}

// actorShape is the envelope of an actor route (reference §1.8).
type actorShape int

const (
	shortEnvelope     actorShape = iota // stickiness, lifecycle: results, next
	valuedEnvelope                      // trends: the full envelope, value_at_data_point filled
	fullEnvelope                        // path (and funnel): the full envelope, no value
	retentionEnvelope                   // retention: result of {person, appearances}
)

// actorQuery is one actor route's query.
type actorQuery func(r *http.Request, project uint64, f *insight.Filter, page insight.Page, now time.Time) ([]insight.Actor, error)

func (a *API) personsTrends(w http.ResponseWriter, r *http.Request) error {
	return a.serveActors(w, r, true, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return a.insights.Trends(r.Context(), p, f, r.URL.Query(), page)
	})
}

func (a *API) personsStickiness(w http.ResponseWriter, r *http.Request) error {
	return a.serveActors(w, r, false, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return a.insights.Stickiness(r.Context(), p, f, r.URL.Query(), page)
	})
}

func (a *API) personsLifecycle(w http.ResponseWriter, r *http.Request) error {
	return a.serveActors(w, r, false, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, now time.Time) ([]insight.Actor, error) {
		return a.insights.Lifecycle(r.Context(), p, f, r.URL.Query(), page, now)
	})
}

// serveActors decodes the shared filter, runs the route's query for one
// page (one row more than the limit, to know whether a next page exists),
// and answers the page's persons in the query's order. valued: trends
// (its envelope, and value_at_data_point filled).
func (a *API) serveActors(w http.ResponseWriter, r *http.Request, valued bool, run actorQuery) error {
	if valued {
		return a.serveActorsAs(w, r, valuedEnvelope, run)
	}
	return a.serveActorsAs(w, r, shortEnvelope, run)
}

// serveActorsAs is serveActors answering in shape's envelope.
func (a *API) serveActorsAs(w http.ResponseWriter, r *http.Request, shape actorShape, run actorQuery) error {
	return a.serveActorsOf(w, r, actorParams{q: r.URL.Query()}, shape, run)
}

// actorParams are the parameters of an actor request: the query string,
// or a POST body merged over it (withBodyParams, insights_funnel.go);
// limit and offset name its paging parameters when they are not "limit"
// and "offset".
type actorParams struct {
	q             url.Values
	limit, offset string
}

// serveActorsOf is serveActorsAs over given parameters; next and initial
// carry them all in the query string, so a GET on them pages a POST too.
func (a *API) serveActorsOf(w http.ResponseWriter, r *http.Request, p actorParams, shape actorShape, run actorQuery) error {
	valued := shape == valuedEnvelope
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	csv, err := wantsCSV(r)
	if err != nil {
		return err
	}
	q := p.q
	if p.limit == "" {
		p.limit, p.offset = "limit", "offset"
	}
	win, err := paginate(url.Values{"limit": q[p.limit], "offset": q[p.offset]}, offsetPaging)
	if e, ok := err.(*Error); ok && e.Attr != nil && p.limit != "limit" {
		name := map[string]string{"limit": p.limit, "offset": p.offset}[*e.Attr]
		return invalid(name, strings.Replace(e.Detail, *e.Attr, name, 1))
	}
	if err != nil {
		return err
	}
	now := time.Now()
	fq := q
	if shape == retentionEnvelope {
		fq = insight.RetentionQuery(q)
	}
	f, err := insight.ParseFilter(fq, proj.Location(), now)
	if err != nil {
		return err
	}
	if a.cohorts != nil {
		f.Cohorts = a.cohorts.Options(proj.ID).Cohorts
	}
	page := insight.Page{Limit: win.Limit + 1, Offset: win.Offset}
	if csv && !win.HasLimit {
		page.Limit = 0 // an export without a limit holds every actor
	}
	found, err := run(r, proj.ID, f, page, now)
	if err != nil {
		return err
	}
	more := page.Limit > 0 && len(found) > win.Limit
	if more {
		found = found[:win.Limit]
	}
	people, err := a.hydrate(r.Context(), proj.ID, found, valued)
	if err != nil {
		return err
	}
	if csv {
		return a.writeActorsCSV(w, people)
	}
	link := func(offset int) string {
		u := a.absolute(r)
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set(p.limit, strconv.Itoa(win.Limit))
		v.Set(p.offset, strconv.Itoa(offset))
		u.RawQuery = v.Encode()
		return u.String()
	}
	var next *string
	if more {
		s := link(win.Offset + win.Limit)
		next = &s
	}
	if shape == retentionEnvelope {
		writeJSON(w, http.StatusOK, retentionAnswer(people, next))
		return nil
	}
	results := []actorPage{{People: people, Count: len(people)}}
	if shape == shortEnvelope {
		writeJSON(w, http.StatusOK, actorsEnvelope{Results: results, Next: next})
		return nil
	}
	writeJSON(w, http.StatusOK, trendsEnvelope{Results: results, Next: next, Initial: link(0),
		LastRefresh: now.UTC().Format("2006-01-02T15:04:05Z")})
	return nil
}

// hydrate reads the persons of a page in batches, keeping the page's
// order; a person deleted since the query chose it is left out.
func (a *API) hydrate(ctx context.Context, project uint64, found []insight.Actor, valued bool) ([]actorJSON, error) {
	out := make([]actorJSON, 0, len(found))
	const batch = 1000
	for start := 0; start < len(found); start += batch {
		part := found[start:min(start+batch, len(found))]
		ids := make([]uint64, len(part))
		for i, x := range part {
			ids[i] = x.PersonID
		}
		byID, err := a.store.PersonsByID(ctx, project, ids)
		if err != nil {
			return nil, err
		}
		for _, x := range part {
			p, ok := byID[x.PersonID]
			if !ok {
				continue
			}
			j := actorJSON{Type: "person", Person: personJSON(p), MatchedRecordings: []any{}, appearances: x.Appearances}
			if valued {
				v := x.Value
				j.ValueAtDataPoint = &v
			}
			out = append(out, j)
		}
	}
	return out, nil
}

func (a *API) writeActorsCSV(w http.ResponseWriter, people []actorJSON) error {
	out := csvexport.NewWriter()
	defer out.Close()
	for _, p := range people {
		if err := out.Add(actorCSV{Person: p.Person, ValueAtDataPoint: p.ValueAtDataPoint, Appearances: p.appearances}); err != nil {
			return err
		}
	}
	a.sendPersonsCSV(w, out)
	return nil
}
