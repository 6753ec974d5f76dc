package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The analysis phase: the actor routes over a 30-day window of events (full:
// 5M events over the 1M persons; quick: 250k over 50k), each against a
// bare count of the same window's events of the same event names, and
// values/ and persons/cohorts/ against a bare GET person, all measured
// in the phase itself so `-only g10` needs no other phase.

// The window holds only this phase's events: the main dataset starts on
// 2026-04-01 (generator.base).
var g10From = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const (
	g10Days = 30
	// g10Session is the number of events of one generated session.
	g10Session = 5
	g10IDs     = "bench_g10_ids"
	g10SeqBase = uint64(1) << 40 // seq of the generated rows: far above the stream's
)

func g10To() time.Time { return g10From.AddDate(0, 0, g10Days) }

// G10Dataset describes the events generated for the analysis phase.
type G10Dataset struct {
	Events        int               `json:"events"`
	Sessions      int               `json:"sessions"`
	DistinctIDs   uint64            `json:"distinct_ids"`
	From          time.Time         `json:"from"`
	To            time.Time         `json:"to"`
	ByEvent       map[string]uint64 `json:"by_event"`
	InsertSeconds float64           `json:"insert_seconds"`
	// Returned is the number of persons each measured request answered
	// (the first page, limit 100): a measurement of an empty answer
	// would prove nothing.
	Returned map[string]int `json:"persons_returned"`
}

// g10Insert fills the window straight into ClickHouse (this phase
// measures reads; the ingest phase measures the ingester's path): sessions of five events a minute
// and a half apart, each session of one distinct id of a live person of
// the main dataset (user_, anon_ and fill_ ids, so the set is the same
// whatever ran before), chosen by hash. Every value is a hash of the
// row number: the same seed of persons gives the same rows. In a session:
// a $pageview, then signed_up / activated / purchased at positions 1-3
// with probability 0.3 each (else $pageview, $autocapture, $pageview),
// then $autocapture or checkout_step; ~330-byte properties whose
// $current_url is one of ten pages.
const g10InsertSQL = `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)
SELECT ?,
  toUUID(UUIDNumToString(toFixedString(concat(toFixedString(reinterpretAsString(number), 8), toFixedString(reinterpretAsString(cityHash64(number)), 8)), 16))),
  multiIf(pos = 0, '$pageview',
          pos = 1, if(h % 10 < 3, 'signed_up', '$pageview'),
          pos = 2, if(h % 10 < 3, 'activated', '$autocapture'),
          pos = 3, if(h % 10 < 3, 'purchased', '$pageview'),
          if(h % 2 = 0, 'checkout_step', '$autocapture')),
  distinct_id, person_id, person_uuid,
  toDateTime(? + start + pos * 90 + h % 60), toUInt16(h % 1000),
  concat('{"$current_url":"https://app.example.com/', page,
    '","$referrer":"https://www.search.example.org/?q=term', toString(h % 10000),
    '","$browser":"', arrayElement(['Chrome', 'Firefox', 'Safari', 'Edge'], 1 + intDiv(h, 7) % 4),
    '","$os":"', arrayElement(['Linux', 'Mac OS X', 'Windows', 'iOS', 'Android'], 1 + intDiv(h, 31) % 5),
    '","$screen_width":', toString(1024 + intDiv(h, 101) % 1024),
    ',"$lib":"web","$lib_version":"1.', toString(intDiv(h, 997) % 100),
    '.0","$session_id":"', hex(cityHash64(s, 4)), '","$pathname":"/', page,
    '","utm_source":"newsletter","utm_campaign":"c', toString(intDiv(h, 13) % 50), '"}'),
  ? + number
FROM (
  SELECT number, intDiv(number, ?) AS s, number % ? AS pos, cityHash64(number, 2) AS h,
    cityHash64(s, 1) % ? AS start, toUInt64(cityHash64(s, 3) % ?) AS n,
    arrayElement(['home', 'pricing', 'docs', 'blog', 'signup', 'login', 'settings', 'billing', 'products', 'search'], 1 + intDiv(h, 3) % 10) AS page
  FROM numbers(?) WHERE number >= ?
) AS shaped ALL INNER JOIN (SELECT n, distinct_id, person_id, person_uuid FROM ` + g10IDs + `) AS ids USING n`

// g10Chunk is the most events one insert statement writes.
const g10Chunk = 500_000

// g10IDsSQL numbers the live distinct ids in a fixed order.
const g10IDsSQL = `INSERT INTO ` + g10IDs + ` (n, distinct_id, person_id, person_uuid)
SELECT rowNumberInAllBlocks(), distinct_id, person_id, person_uuid FROM (
  SELECT distinct_id, person_id, uuid AS person_uuid FROM
    (SELECT distinct_id, person_id FROM person_distinct_ids FINAL
     WHERE project_id = ? AND is_deleted = 0 AND match(distinct_id, '^(user|anon|fill)_')) AS owned
  ALL INNER JOIN (SELECT id AS person_id, uuid FROM persons FINAL WHERE project_id = ? AND is_deleted = 0) AS live USING person_id
  ORDER BY distinct_id)`

func (s *session) g10Dataset(ctx context.Context) error {
	conn := s.store.Conn()
	events := 5 * s.p.persons
	sessions := events / g10Session
	start := time.Now()
	for _, q := range []string{"DROP TABLE IF EXISTS " + g10IDs,
		"CREATE TABLE " + g10IDs + " (n UInt64, distinct_id String, person_id UInt64, person_uuid UUID) ENGINE = Memory"} {
		if err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	defer func() { _ = conn.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+g10IDs) }()
	if err := conn.Exec(ctx, g10IDsSQL, s.project, s.project); err != nil {
		return fmt.Errorf("numbering distinct ids: %w", err)
	}
	ids := s.count(ctx, "SELECT count() FROM "+g10IDs)
	if ids == 0 {
		return fmt.Errorf("no live distinct ids to give events to")
	}
	// Sessions start so that their last event is still inside the window.
	span := uint64(g10Days*86400 - 3600)
	s.lg.f("G10: inserting %d events (%d sessions over %d distinct ids) into %s .. %s",
		events, sessions, ids, g10From.Format(time.DateOnly), g10To().Format(time.DateOnly))
	// In chunks of whole sessions: one statement of 5M rows sends nothing
	// back for longer than the driver's read timeout on a loaded machine.
	chunk := uint64(g10Chunk - g10Chunk%g10Session)
	for lo := uint64(0); lo < uint64(events); lo += chunk {
		hi := min(lo+chunk, uint64(events))
		if err := conn.Exec(ctx, g10InsertSQL, s.project, g10From.Unix(), g10SeqBase,
			g10Session, g10Session, span, ids, hi, lo); err != nil {
			return fmt.Errorf("inserting events %d..%d: %w", lo, hi, err)
		}
	}
	d := &G10Dataset{Events: events, Sessions: sessions, DistinctIDs: ids, From: g10From, To: g10To(),
		InsertSeconds: time.Since(start).Seconds(), ByEvent: map[string]uint64{}, Returned: map[string]int{}}
	rows, err := conn.Query(ctx, "SELECT event, count() FROM events WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?) GROUP BY event",
		s.project, g10From.Unix(), g10To().Unix())
	if err != nil {
		return err
	}
	defer rows.Close()
	var total uint64
	for rows.Next() {
		var name string
		var n uint64
		if err := rows.Scan(&name, &n); err != nil {
			return err
		}
		d.ByEvent[name], total = n, total+n
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if total != uint64(events) {
		return fmt.Errorf("the window holds %d events, want %d", total, events)
	}
	s.res.Dataset.G10 = d
	s.lg.f("G10: %d events in %.1fs: %v", total, d.InsertSeconds, d.ByEvent)
	return nil
}

// g10Route is one measured actor request and the event names its bare
// baseline counts.
type g10Route struct {
	name   string
	path   string
	events []string
}

func (a *apiServer) g10Routes() []g10Route {
	return analysisRoutes(a.project, g10From, g10To(), []string{"signed_up", "activated", "purchased"})
}

// analysisRoutes are the actor routes over the days from..to (exclusive),
// $pageview's and a funnel of steps.
func analysisRoutes(project uint64, from, to time.Time, steps []string) []g10Route {
	day := func(t time.Time) string { return t.Format(time.DateOnly) }
	days := int(to.Sub(from).Hours() / 24)
	first, last := day(from), day(to.AddDate(0, 0, -1))
	pv := `[{"id":"$pageview","type":"events","order":0}]`
	var funnel []string
	for i, e := range steps {
		funnel = append(funnel, fmt.Sprintf(`{"id":%q,"type":"events","order":%d}`, e, i))
	}
	path := func(route string, kv ...string) string {
		q := url.Values{"date_from": {first}, "date_to": {last}, "limit": {"100"}}
		for i := 0; i+1 < len(kv); i += 2 {
			q.Set(kv[i], kv[i+1])
		}
		return fmt.Sprintf("/api/projects/%d/persons/%s/?%s", project, route, q.Encode())
	}
	only := []string{"$pageview"}
	return []g10Route{
		{"trends", path("trends", "events", pv, "entity_id", "$pageview", "entity_type", "events"), only},
		{fmt.Sprintf("funnel, %d steps", len(steps)), path("funnel", "events", "["+strings.Join(funnel, ",")+"]",
			"funnel_step", fmt.Sprint(len(steps)), "funnel_window_days", "14"), steps},
		{"retention", path("retention", "target_entity", `{"id":"$pageview","type":"events"}`, "period", "Day",
			"total_intervals", fmt.Sprint(days), "selected_interval", "0"), only},
		{"lifecycle", path("lifecycle", "events", pv, "target_date", day(from.AddDate(0, 0, days*14/30)), "lifecycle_type", "returning"), only},
		{"stickiness", path("stickiness", "events", pv, "entity_id", "$pageview", "entity_type", "events", "stickiness_days", "2"), only},
		{"path", path("path", "include_event_types", `["$pageview"]`, "step_limit", "5"), only},
	}
}

// g10Scan is the baseline: the bare driver counting the window's events
// of the route's event names (default settings).
func (s *session) g10Scan(names []string) func(ctx context.Context, i int) error {
	return s.windowScan(g10From, g10To(), names)
}

// windowScan counts the main project's events of names in from..to.
func (s *session) windowScan(from, to time.Time, names []string) func(ctx context.Context, i int) error {
	sql := "SELECT count() FROM events WHERE project_id = ? AND timestamp >= toDateTime(?) AND timestamp < toDateTime(?) AND event IN (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
	args := []any{s.project, from.Unix(), to.Unix()}
	for _, n := range names {
		args = append(args, n)
	}
	conn := s.rawStore.Conn()
	return func(ctx context.Context, i int) error {
		var n uint64
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no events of %v in the window", names)
		}
		return nil
	}
}

// peopleIn counts the persons of an actor answer (retention's envelope
// differs from the others').
func peopleIn(body []byte) (int, error) {
	var v struct {
		Results []struct {
			People []json.RawMessage `json:"people"`
		} `json:"results"`
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, err
	}
	n := len(v.Result)
	for _, r := range v.Results {
		n += len(r.People)
	}
	return n, nil
}

const (
	nameG10Values  = "G10 values/?key=plan"
	nameG10Cohorts = "G10 persons/cohorts/?person_id="
)

func g10Name(route string) string { return "G10 " + route }

// g10 inserts the window's events and measures the routes.
func (s *session) g10(ctx context.Context) error {
	if err := s.startReaders(ctx); err != nil {
		return err
	}
	if err := s.g10Dataset(ctx); err != nil {
		return err
	}
	ids, err := s.samplePersons(ctx, 1000, ^uint64(0))
	if err != nil {
		return err
	}
	if err := s.g10Cohorts(ctx, ids); err != nil {
		return fmt.Errorf("creating cohorts: %w", err)
	}
	s.settle(ctx)
	record := func(base bool, ls []Latency) {
		for _, l := range ls {
			if base {
				s.res.Baseline.G10 = append(s.res.Baseline.G10, l)
			} else {
				s.res.Project.G10 = append(s.res.Project.G10, l)
			}
			s.lg.f("%s", l)
		}
	}
	b := budget{N: 10, Max: 2 * time.Minute}
	if s.p.mode == "quick" {
		b = budget{N: 10, Max: 20 * time.Second}
	}
	d := s.res.Dataset.G10
	stopProf := s.api.cpuProfile(s.profile("api-g10.cpu.pprof"))
	defer stopProf()
	for _, r := range s.api.g10Routes() {
		body, err := s.api.get(ctx, r.path)
		if err != nil {
			return err
		}
		if d.Returned[r.name], err = peopleIn(body); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		s.lg.f("G10 %s: %d persons on the first page", r.name, d.Returned[r.name])
		api := func(ctx context.Context, i int) error { _, err := s.api.get(ctx, r.path); return err }
		ls := measureSet(ctx, "idle", 1, b, namedOp{name: g10Name(r.name) + layerRaw, op: s.g10Scan(r.events)}, namedOp{name: g10Name(r.name) + layerAPI, op: api})
		record(true, ls[:1])
		record(false, ls[1:])
	}
	raw := s.rawStore.Conn()
	id := func(i int) uint64 { return ids[i%len(ids)] }
	small := budget{N: 200, Max: 40 * time.Second}
	if s.p.mode == "quick" {
		small = budget{N: 100, Max: 10 * time.Second}
	}
	values := fmt.Sprintf("/api/projects/%d/persons/values/?key=plan", s.project)
	// values/ answers from counts kept since the last watermark; with no
	// write meanwhile (as here) that costs no statement. Measured beside
	// it: the count without kept counts (the first request, a value
	// filter, a key of many values) and what a request after a write
	// adds (pkg/chstore/values_counts.go's two statements, copied: the
	// buckets with rows above a watermark, here just below the newest
	// row, and the recount of that bucket).
	recount, err := s.valuesRecount(ctx, raw)
	if err != nil {
		return err
	}
	ls := measureSet(ctx, "idle", 1, small,
		namedOp{name: "G10 " + nameGet + layerRaw, op: func(ctx context.Context, i int) error { return rawGetPerson(ctx, raw, s.project, id(i)) }},
		namedOp{name: nameG10Values + layerAPI, op: func(ctx context.Context, i int) error { _, err := s.api.get(ctx, values); return err }},
		namedOp{name: nameG10Cohorts + layerAPI, op: func(ctx context.Context, i int) error {
			_, err := s.api.get(ctx, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%d", s.project, id(i)))
			return err
		}},

		namedOp{name: nameG10Values + ", counted without kept counts: store", op: func(ctx context.Context, i int) error {
			_, err := s.rawStore.PropertyValues(ctx, s.project, "plan", "")
			return err
		}},

		namedOp{name: nameG10Values + ", recount after a write: bare driver", op: recount})
	record(true, ls[:1])
	record(false, ls[1:])
	// The same under a steady write load (g10WriteRate captured $set per
	// second): values/ recounts the buckets written since the watermark
	// its counts were made at, whenever the watermark moved.
	stop, err := s.steadyWrites(ctx, raw)
	if err != nil {
		return err
	}
	ls = measureSet(ctx, "writes", 1, small,
		namedOp{name: "G10 " + nameGet + layerRaw, op: func(ctx context.Context, i int) error { return rawGetPerson(ctx, raw, s.project, id(i)) }},
		namedOp{name: nameG10Values + layerAPI, op: func(ctx context.Context, i int) error { _, err := s.api.get(ctx, values); return err }},
		namedOp{name: nameG10Cohorts + layerAPI, op: func(ctx context.Context, i int) error {
			_, err := s.api.get(ctx, fmt.Sprintf("/api/projects/%d/persons/cohorts/?person_id=%d", s.project, id(i)))
			return err
		}},
	)
	written, err := stop()
	if err != nil {
		return fmt.Errorf("steady writes: %w", err)
	}
	s.lg.f("G10 under writes: %d captured $set published at %d/s", written, g10WriteRate)
	record(true, ls[:1])
	record(false, ls[1:])
	return nil
}

// g10Cohorts gives the project the three kinds of cohort whose
// membership persons/cohorts/ evaluates: a person-property one, a
// behavioural one (a $pageview in the last year) and a static one of
// 1000 persons.
func (s *session) g10Cohorts(ctx context.Context, ids []uint64) error {
	bodies := []map[string]any{
		{"name": "enterprise", "filters": map[string]any{"properties": map[string]any{"type": "AND", "values": []any{
			map[string]any{"type": "person", "key": "plan", "value": "enterprise"}}}}},
		{"name": "viewers", "filters": map[string]any{"properties": map[string]any{"type": "AND", "values": []any{
			map[string]any{"type": "behavioral", "key": "$pageview", "value": "performed_event", "time_value": 1, "time_interval": "year"}}}}},
		{"name": "imported", "is_static": true, "person_ids": ids},
	}
	for _, b := range bodies {
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		status, resp, err := s.api.do(ctx, "POST", fmt.Sprintf("/api/projects/%d/cohorts/", s.project), raw)
		if err != nil {
			return err
		}
		if status != 201 {
			return fmt.Errorf("POST cohort %v: %d %s", b["name"], status, resp)
		}
	}
	return nil
}
