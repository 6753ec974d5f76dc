package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/timeline"
)

// parseDate reads an absolute date (2026-01-02, RFC 3339, "2026-01-02
// 15:04:05"), "all", or a relative one (-7d, -24h, -2w, -3m, -1y, the
// property filters' syntax) relative to now.
func parseDate(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "all" {
		return time.Unix(0, 0).UTC(), true
	}
	if t, ok := propfilter.RelativeDate(s, now); ok {
		return t, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// entity is an element of the legacy `events` filter.
type entity struct {
	ID         any             `json:"id"`
	Properties json.RawMessage `json:"properties"`
}

// propertiesTimeline serves GET /persons/{id}/properties_timeline/.
func (a *API) propertiesTimeline(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	p, err := a.lookupPerson(r, proj.ID)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	now := time.Now().UTC()
	from, to := p.CreatedAt.UTC(), now
	if v := q.Get("date_from"); v != "" {
		var ok bool
		if from, ok = parseDate(v, now); !ok {
			return invalid("date_from", "date_from must be a date, a date-time, or relative like -7d.")
		}
	}
	if v := q.Get("date_to"); v != "" {
		var ok bool
		if to, ok = parseDate(v, now); !ok {
			return invalid("date_to", "date_to must be a date, a date-time, or relative like -7d.")
		}
		if len(v) == len("2006-01-02") {
			to = to.Add(24*time.Hour - time.Nanosecond) // the whole day
		}
	}
	var tq timeline.Query
	tq.From, tq.To = from, to
	keys, err := propfilter.Keys(q.Get("properties"))
	if err != nil {
		return err
	}
	if v := q.Get("events"); v != "" {
		var entities []entity
		if err := json.Unmarshal([]byte(v), &entities); err != nil {
			return invalid("events", "events must be a JSON array of {\"id\": event name}.")
		}
		for _, e := range entities {
			if name, ok := e.ID.(string); ok && name != "" {
				tq.Events = append(tq.Events, name)
			}
			if len(e.Properties) > 0 {
				more, err := propfilter.Keys(string(e.Properties))
				if err != nil {
					return err
				}
				keys = append(keys, more...)
			}
		}
	}
	if b := q.Get("breakdown"); b != "" && (q.Get("breakdown_type") == "" || q.Get("breakdown_type") == "person") {
		keys = append(keys, b)
	}
	tq.Keys = timeline.SortedKeys(keys)
	events, err := a.store.PersonEvents(r.Context(), proj.ID, p.DistinctIDs, to)
	if err != nil {
		return err
	}
	list := make([]timeline.Event, len(events))
	for i, e := range events {
		list[i] = timeline.Event{Name: e.Name, Timestamp: e.Timestamp, Properties: e.Properties}
	}
	points, err := timeline.Build(list, tq)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"points":                points,
		"crucial_property_keys": tq.Keys,
		"effective_date_from":   from.Format(time.RFC3339),
		"effective_date_to":     to.Format(time.RFC3339),
	})
	return nil
}
