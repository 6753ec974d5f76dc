package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/stream"
)

// ev is one generated event of an analysis test.
type ev struct {
	name, distinctID string
	at               time.Time
	props            map[string]any
	extra            string // more top-level envelope fields, e.g. `"$set":{...}`
}

// publishEvents publishes events to a project in order, runs the ingester
// (once per env) and waits until they are folded.
func (e *env) publishEvents(project uint64, events ...ev) {
	e.t.Helper()
	ctx := context.Background()
	var last uint64
	for _, x := range events {
		id := uuid.NewString()
		props := x.props
		if props == nil {
			props = map[string]any{}
		}
		pj, _ := json.Marshal(props)
		body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,"event":%q,"distinct_id":%q,"properties":%s`, id, x.at.UTC().Format(time.RFC3339Nano), x.name, x.distinctID, pj)
		if x.extra != "" {
			body += "," + x.extra
		}
		body += "}"
		ack, err := stream.Publish(ctx, e.nats.JS, project, id, []byte(body))
		if err != nil {
			e.t.Fatal(err)
		}
		last = ack.Sequence
	}
	if !e.ingesting {
		e.ingesting = true
		e.startIngester()
	}
	if err := e.waitSeq(last); err != nil {
		e.t.Fatal(err)
	}
}

// actors calls an actor route and returns the persons' distinct ids (the
// first of each, sorted within each person) in answer order, the values,
// and next.
func (e *env) actors(route string, params url.Values) (ids []string, values []float64, next string) {
	e.t.Helper()
	r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/%s/?%s", e.projectA.ID, route, params.Encode()))
	return e.actorsOf(r)
}

func (e *env) actorsOf(r response) (ids []string, values []float64, next string) {
	e.t.Helper()
	if r.status != 200 {
		e.t.Fatalf("status %d: %s", r.status, r.body)
	}
	var body struct {
		Results []struct {
			People []struct {
				ID          uint64   `json:"id"`
				Type        string   `json:"type"`
				DistinctIDs []string `json:"distinct_ids"`
				Value       *float64 `json:"value_at_data_point"`
			} `json:"people"`
			Count int `json:"count"`
		} `json:"results"`
		Next *string `json:"next"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Results) != 1 {
		e.t.Fatalf("body %s: %v", r.body, err)
	}
	res := body.Results[0]
	if res.Count != len(res.People) {
		e.t.Fatalf("count %d for %d people", res.Count, len(res.People))
	}
	for _, p := range res.People {
		ds := append([]string(nil), p.DistinctIDs...)
		sort.Strings(ds)
		ids = append(ids, ds[0])
		if p.Value != nil {
			values = append(values, *p.Value)
		}
		if p.Type != "person" {
			e.t.Fatalf("type %q", p.Type)
		}
	}
	if body.Next != nil {
		next = *body.Next
	}
	return ids, values, next
}

func params(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func day(s string, hour int) time.Time {
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return t.Add(time.Duration(hour) * time.Hour)
}
