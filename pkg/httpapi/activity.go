package httpapi

import (
	"net/http"
	"strconv"

	"github.com/personhub/personhub/pkg/activity"
)

// activityJSON is an activity log entry as the API shows it.
type activityJSON struct {
	ID        string          `json:"id"`
	User      activityUser    `json:"user"`
	Activity  string          `json:"activity"`
	Scope     string          `json:"scope"`
	ItemID    string          `json:"item_id"`
	Detail    activity.Detail `json:"detail"`
	CreatedAt string          `json:"created_at"`
}

// activityUser names who made a change: personal API keys act for their
// organization, so the key's label stands in for the user's name.
type activityUser struct {
	FirstName string `json:"first_name"`
	Email     string `json:"email"`
}

// activityPage is the activity routes' envelope (limit/page, not offset).
type activityPage struct {
	Results    []activityJSON `json:"results"`
	Next       *string        `json:"next"`
	Previous   *string        `json:"previous"`
	TotalCount uint64         `json:"total_count"`
}

// Activity paging: limit (default 10, at most 100) and page (from 1).
const (
	activityDefaultLimit = 10
	activityMaxLimit     = 100
)

func activityParams(r *http.Request) (limit, page int, err error) {
	limit, page = activityDefaultLimit, 1
	q := r.URL.Query()
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > activityMaxLimit {
			return 0, 0, invalid("limit", "limit must be an integer from 1 to "+strconv.Itoa(activityMaxLimit)+".")
		}
	}
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return 0, 0, invalid("page", "page must be a positive integer.")
		}
	}
	return limit, page, nil
}

// writeActivity lists entries for q (Limit and Page are read from the
// request) in the activity envelope.
func (a *API) writeActivity(w http.ResponseWriter, r *http.Request, log *activity.Log, q activity.Query) error {
	limit, page, err := activityParams(r)
	if err != nil {
		return err
	}
	q.Limit, q.Page = limit, page
	entries, total, err := log.List(r.Context(), q)
	if err != nil {
		return err
	}
	out := activityPage{Results: make([]activityJSON, 0, len(entries)), TotalCount: total}
	for _, e := range entries {
		if e.Detail.Changes == nil {
			e.Detail.Changes = []activity.Change{}
		}
		out.Results = append(out.Results, activityJSON{
			ID: e.ID.String(), User: activityUser{FirstName: e.UserLabel, Email: ""}, Activity: e.Activity,
			Scope: e.Scope, ItemID: e.ItemID, Detail: e.Detail,
			CreatedAt: e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		})
	}
	link := func(p int) *string {
		u := a.absolute(r)
		v := r.URL.Query()
		v.Set("limit", strconv.Itoa(limit))
		v.Set("page", strconv.Itoa(p))
		u.RawQuery = v.Encode()
		s := u.String()
		return &s
	}
	if uint64(page*limit) < total {
		out.Next = link(page + 1)
	}
	if page > 1 {
		out.Previous = link(page - 1)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
