package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/personhub/personhub/pkg/propfilter"
)

// The list reads measure the persons list against what a list that reads
// a page, not the project, would cost: GET person by the bare driver (a few
// hundred rows read by key), and for a property filter a bare scan of the
// columns the filter reads. Both baselines run in the same set as the
// routes they divide, interleaved.
const (
	nameListDistinctID = "list distinct_id="
	nameListEmail      = "list email="
	nameListSearchMail = "list search= (email substring)"
	nameListSearchID   = "list search= (exact distinct id)"
	nameListOffset     = "list offset "
	nameScan           = "property filter scan, no FINAL"
	// nameGetG5 is the bare GET person run inside the list's sets, the
	// baseline of their ratios (GET person's own set runs before, at
	// other budgets).
	nameGetG5 = "GET person (G5 set)"
)

// deepOffsets are the deep pages' offsets; one deeper than the project is skipped.
var deepOffsets = []int{10_000, 100_000}

// probe is a live person's distinct id and email, for the indexed filters.
type probe struct{ distinctID, email string }

// sampleProbes returns up to n live persons with an email, in a fixed
// pseudo-random order.
func (s *session) sampleProbes(ctx context.Context, project uint64, n int) ([]probe, error) {
	rows, err := s.store.Conn().Query(rawCtx(ctx),
		"SELECT distinct_ids[1], property_values[indexOf(property_keys, 'email')] FROM persons FINAL WHERE project_id = ? AND is_deleted = 0 AND has(property_keys, 'email') AND notEmpty(distinct_ids) ORDER BY cityHash64(id) LIMIT ?",
		project, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []probe
	for rows.Next() {
		var p probe
		if err := rows.Scan(&p.distinctID, &p.email); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("project %d: no live person with an email", project)
	}
	return out, rows.Err()
}

// rawScanFilter is the property filter's baseline: the columns the filter reads, scanned
// without FINAL, default settings.
func rawScanFilter(ctx context.Context, conn driver.Conn, project uint64, f propfilter.Clause) error {
	var n uint64
	return conn.QueryRow(ctx, "SELECT count() FROM persons WHERE project_id = ? AND "+f.SQL, append([]any{project}, f.Args...)...).Scan(&n)
}

// listOp is a GET of the project's list with query q(i).
func (a *apiServer) listOp(project uint64, q func(i int) string) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		p := fmt.Sprintf("/api/projects/%d/persons/", project)
		if qs := q(i); qs != "" {
			p += "?" + qs
		}
		_, err := a.get(ctx, p)
		return err
	}
}

func fixed(q string) func(int) string { return func(int) string { return q } }

// g5Ops are the list routes and the baselines of one project.
type g5Ops struct {
	rawGet, scan, list, filtered func(ctx context.Context, i int) error
}

func (s *session) g5Ops(project uint64, ids []uint64) (g5Ops, error) {
	filter, err := propfilter.Parse(listFilter)
	if err != nil {
		return g5Ops{}, err
	}
	raw := s.rawStore.Conn()
	return g5Ops{
		rawGet:   func(ctx context.Context, i int) error { return rawGetPerson(ctx, raw, project, ids[i%len(ids)]) },
		scan:     func(ctx context.Context, i int) error { return rawScanFilter(ctx, raw, project, filter) },
		list:     s.api.listOp(project, fixed("")),
		filtered: s.api.listOp(project, fixed("properties="+url.QueryEscape(listFilter))),
	}, nil
}

// g5 measures the list's rows on the main project, idle: every list route at
// c=1 in one interleaved set with the bare GET person and the bare scan,
// then the unfiltered first page at c=16 with the bare GET person.
func (s *session) g5(ctx context.Context, ids []uint64, record func([]Latency)) error {
	probes, err := s.sampleProbes(ctx, s.project, 1000)
	if err != nil {
		return err
	}
	ops, err := s.g5Ops(s.project, ids)
	if err != nil {
		return err
	}
	pr := func(i int) probe { return probes[i%len(probes)] }
	a := s.api
	set := []namedOp{
		{name: nameGetG5 + layerRaw, op: ops.rawGet},
		{name: nameScan + layerRaw, op: ops.scan},
		{name: nameList + layerAPI, op: ops.list},
		{name: nameListFiltered + layerAPI, op: ops.filtered},
		{name: nameListDistinctID + layerAPI, op: a.listOp(s.project, func(i int) string { return "distinct_id=" + url.QueryEscape(pr(i).distinctID) })},
		{name: nameListEmail + layerAPI, op: a.listOp(s.project, func(i int) string { return "email=" + url.QueryEscape(pr(i).email) })},
		// The local part and its @: a substring that matches one person.
		{name: nameListSearchMail + layerAPI, op: a.listOp(s.project, func(i int) string {
			return "search=" + url.QueryEscape(pr(i).email[:strings.IndexByte(pr(i).email, '@')+1])
		})},
		{name: nameListSearchID + layerAPI, op: a.listOp(s.project, func(i int) string { return "search=" + url.QueryEscape(pr(i).distinctID) })},
	}
	for _, off := range deepOffsets {
		if uint64(off) < s.res.Project.PersonsTotal {
			set = append(set, namedOp{name: fmt.Sprintf("%s%d%s", nameListOffset, off, layerAPI), op: a.listOp(s.project, fixed(fmt.Sprintf("offset=%d", off)))})
		}
	}
	record(measureSet(ctx, "idle", 1, s.p.list1, set...))
	record(measureSet(ctx, "idle", 16, s.p.list16, namedOp{name: nameGetG5 + layerRaw, op: ops.rawGet}, namedOp{name: nameList + layerAPI, op: ops.list}))
	return nil
}

// g5Goals are the persons list's rows: each a ratio against a baseline measured
// in the same set (the bare GET person at c=1; for the property filter the bare scan).
func g5Goals(r *Result, latGoal func(id, what, target string, limit float64, l, base Latency) Goal) []Goal {
	api := func(name string, conc int) Latency { return findLat(r.Project.Reads, name+layerAPI, "idle", conc) }
	get := findLat(r.Baseline.Reads, nameGetG5+layerRaw, "idle", 1)
	persons := fmt.Sprintf("%dk persons", r.Project.PersonsTotal/1000)
	out := []Goal{latGoal("G5a", "list first page p99, c=1, vs bare GET person ("+persons+")", "<= 5x", 5, api(nameList, 1), get)}
	if l := api(nameList, 16); l.N > 0 && get.N > 0 {
		x := ratio(l.P99ms, get.P99ms)
		out = append(out, goal("G5b", "list first page, c=16: requests/s, and p99 vs bare GET person c=1", ">= 50/s, <= 10x",
			fmt.Sprintf("%.1f/s, %.2fx (p99 %.1f vs %.1f ms)", l.QPS, x, l.P99ms, get.P99ms), l.QPS, l.QPS >= 50 && x <= 10))
	} else {
		out = append(out, notMeasured("G5b", "list first page, c=16", ">= 50/s, <= 10x", "not measured"))
	}
	for _, n := range []string{nameListDistinctID, nameListEmail, nameListSearchMail, nameListSearchID} {
		out = append(out, latGoal("G5c", n+" first page p99 vs bare GET person", "<= 5x", 5, api(n, 1), get))
	}
	out = append(out, latGoal("G5d", "property filter first page p99 vs bare scan of its columns (no FINAL)", "<= 1.5x", 1.5,
		api(nameListFiltered, 1), findLat(r.Baseline.Reads, nameScan+layerRaw, "idle", 1)))
	first := api(nameList, 1)
	for _, off := range deepOffsets {
		n := fmt.Sprintf("%s%d", nameListOffset, off)
		if l := api(n, 1); l.N > 0 || uint64(off) < r.Project.PersonsTotal {
			out = append(out, latGoal("G5e", n+" p99 vs first page", "<= 2x", 2, l, first))
		} else {
			out = append(out, notMeasured("G5e", n+" p99 vs first page", "<= 2x", "the project is smaller"))
		}
	}
	return append(out, g5fGoals(r)...)
}
