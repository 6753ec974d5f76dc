package httpapi

import (
	"net/http"

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

// writeActivity lists entries for q (Limit and Page are read from the
// request) in the activity envelope.
func (a *API) writeActivity(w http.ResponseWriter, r *http.Request, log *activity.Log, q activity.Query) error {
	win, err := paginate(r.URL.Query(), activityPaging)
	if err != nil {
		return err
	}
	q.Limit, q.Page = win.Limit, win.Page
	entries, total, err := log.List(r.Context(), q)
	if err != nil {
		return err
	}
	out := activityPage{Results: make([]activityJSON, 0, len(entries)), TotalCount: total}
	for _, e := range entries {
		out.Results = append(out.Results, activityJSON{
			ID: e.ID.String(), User: activityUser{FirstName: e.UserLabel, Email: ""}, Activity: e.Activity,
			Scope: e.Scope, ItemID: e.ItemID, Detail: e.Detail,
			CreatedAt: e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		})
	}
	out.Next, out.Previous = a.pageLinks(r, win, total)
	writeJSON(w, http.StatusOK, out)
	return nil
}
