package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/personhub/personhub/pkg/insight"
)

// retentionRow is a person of a retention answer with the intervals in
// which they came back (reference §5).
type retentionRow struct {
	Person      actorJSON `json:"person"`
	Appearances []int     `json:"appearances"`
}

// retentionBody is retention's envelope (reference §1.8): singular
// "result"; missing_persons is always 0 (deleted persons are excluded
// before paging).
type retentionBody struct {
	Result         []retentionRow `json:"result"`
	Next           *string        `json:"next"`
	MissingPersons int            `json:"missing_persons"`
}

func retentionAnswer(people []actorJSON, next *string) retentionBody {
	rows := make([]retentionRow, len(people))
	for i, p := range people {
		rows[i] = retentionRow{Person: p, Appearances: p.appearances}
	}
	return retentionBody{Result: rows, Next: next}
}

func (a *API) personsRetention(w http.ResponseWriter, r *http.Request) error {
	return a.serveActorsAs(w, r, retentionEnvelope, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, now time.Time) ([]insight.Actor, error) {
		return a.insights.Retention(r.Context(), p, f, r.URL.Query(), page, now)
	})
}

func (a *API) personsPath(w http.ResponseWriter, r *http.Request) error {
	r, err := withBodyParams(r)
	if err != nil {
		return err
	}
	return a.serveActorsAs(w, r, fullEnvelope, func(r *http.Request, p uint64, f *insight.Filter, page insight.Page, _ time.Time) ([]insight.Actor, error) {
		return a.insights.Paths(r.Context(), p, f, r.URL.Query(), page)
	})
}

// withBodyParams merges a POST's JSON object body over the query string
// (the body wins, reference §1.1): strings as they are, other values as
// their JSON text, the form the query string carries them in. The
// request's URL then holds every parameter, so next and initial links
// repeat the body's parameters and a GET on them answers the next page.
func withBodyParams(r *http.Request) (*http.Request, error) {
	if r.Method != http.MethodPost {
		return r, nil
	}
	q, err := actorBodyParams(r)
	if err != nil {
		return nil, err
	}
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	return r2, nil
}

// actorBodyParams are the parameters of an actor request: the query
// string, with a POST body's members merged over it (the body wins; null
// removes a parameter; other values as their JSON text).
func actorBodyParams(r *http.Request) (url.Values, error) {
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
