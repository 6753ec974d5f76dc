package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/personhub/personhub/pkg/activity"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/controlplane"
)

// exportActivityPage is how many activity entries one read of an export
// takes.
const exportActivityPage = 1000

// exportPerson serves GET /persons/{id}/export/: everything stored about
// one person, for a data subject's access request (GDPR art. 15), as one
// JSON document streamed in bounded memory:
//
//	{"exported_at", "person", "distinct_ids", "activity": [entry...],
//	 "property_history": [{"uuid", "event", "distinct_id", "timestamp",
//	   "$set", "$set_once", "$unset"}...],
//	 "events": [{"uuid", "event", "distinct_id", "timestamp", "properties"}...]}
//
// The events are those of the person's current distinct ids, in stream
// order; the property history is the ones among them that update person
// properties. The activity log is null for a key without
// activity_log:read. An error once the answer has begun cuts the connection, so
// a client never takes a cut document for a whole one.
func (a *API) exportPerson(w http.ResponseWriter, r *http.Request) error {
	proj, err := a.project(r)
	if err != nil {
		return err
	}
	if csv, err := wantsCSV(r); err != nil {
		return err
	} else if csv {
		return invalid("format", "The export is one JSON document; format=csv is not offered.")
	}
	p, err := a.lookupPerson(r, proj.ID)
	if err != nil {
		return err
	}
	pj := personJSON(p)
	// The activity log is in only for a key that may read it (the
	// activity routes' scope). Its first page is read before answering,
	// so that a backend that is down is a 503, not a cut answer.
	withActivity := controlplane.ScopeAllows(keyFrom(r.Context()).Scopes, "activity_log:read")
	q := activity.Query{OrganizationID: proj.OrganizationID, Scope: "Person", ProjectID: proj.ID, ItemID: fmt.Sprint(p.ID), Limit: exportActivityPage, Page: 1}
	var entries []activity.Entry
	if withActivity {
		if entries, _, err = a.writes.Activity.List(r.Context(), q); err != nil {
			return err
		}
	}

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="person-%s.json"`, p.UUID))
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriterSize(w, deadlineChunk)
	fail := func(err error) {
		a.log.Warn("person export cut", "project_id", proj.ID, "person_id", p.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
	put := func(prefix string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			fail(err)
		}
		_, _ = out.WriteString(prefix)
		if _, err := out.Write(b); err != nil {
			fail(err)
		}
	}
	put(`{"exported_at":`, time.Now().UTC().Format(time.RFC3339Nano))
	put(`,"person":`, pj)
	put(`,"distinct_ids":`, pj.DistinctIDs)

	sep := ""
	if !withActivity {
		_, _ = out.WriteString(`,"activity":null`)
	} else {
		_, _ = out.WriteString(`,"activity":[`)
	}
	for withActivity {
		for _, e := range entries {
			put(sep, activityJSON{ID: e.ID.String(), User: activityUser{FirstName: e.UserLabel}, Activity: e.Activity,
				Scope: e.Scope, ItemID: e.ItemID, Detail: e.Detail, CreatedAt: e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z")})
			sep = ","
		}
		if len(entries) < exportActivityPage {
			break
		}
		q.Page++
		if entries, _, err = a.writes.Activity.List(r.Context(), q); err != nil {
			fail(err)
		}
	}

	if withActivity {
		_, _ = out.WriteString(`]`)
	}
	_, _ = out.WriteString(`,"property_history":[`)
	sep = ""
	err = a.store.EachPersonEvent(r.Context(), proj.ID, p.DistinctIDs, true, time.Time{}, func(e eventstore.PersonEvent) error {
		var upd struct {
			Set     json.RawMessage `json:"$set,omitempty"`
			SetOnce json.RawMessage `json:"$set_once,omitempty"`
			Unset   json.RawMessage `json:"$unset,omitempty"`
		}
		_ = json.Unmarshal([]byte(e.Properties), &upd)
		put(sep, struct {
			UUID       string    `json:"uuid"`
			Event      string    `json:"event"`
			DistinctID string    `json:"distinct_id"`
			Timestamp  time.Time `json:"timestamp"`
			Set        any       `json:"$set,omitempty"`
			SetOnce    any       `json:"$set_once,omitempty"`
			Unset      any       `json:"$unset,omitempty"`
		}{e.UUID.String(), e.Name, e.DistinctID, e.Timestamp, rawOrNil(upd.Set), rawOrNil(upd.SetOnce), rawOrNil(upd.Unset)})
		sep = ","
		return nil
	})
	if err != nil {
		fail(err)
	}

	_, _ = out.WriteString(`],"events":[`)
	sep = ""
	err = a.store.EachPersonEvent(r.Context(), proj.ID, p.DistinctIDs, false, time.Time{}, func(e eventstore.PersonEvent) error {
		put(sep, struct {
			UUID       string          `json:"uuid"`
			Event      string          `json:"event"`
			DistinctID string          `json:"distinct_id"`
			Timestamp  time.Time       `json:"timestamp"`
			Properties json.RawMessage `json:"properties"`
		}{e.UUID.String(), e.Name, e.DistinctID, e.Timestamp, json.RawMessage(e.Properties)})
		sep = ","
		return nil
	})
	if err != nil {
		fail(err)
	}
	_, _ = out.WriteString("]}\n")
	if err := out.Flush(); err != nil {
		fail(err)
	}
	return nil
}

// rawOrNil is a JSON value to write as it is, or nil (left out) when absent.
func rawOrNil(v json.RawMessage) any {
	if len(v) == 0 {
		return nil
	}
	return v
}
