package insight

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScanReadsOverridesNotEveryPerson: the scan joins the overrides, not
// person_distinct_ids; persons only for person columns; and the command
// filter (which reads properties) only when a named event may be a command.
func TestScanReadsOverridesNotEveryPerson(t *testing.T) {
	base := scan{project: 1, to: time.Unix(2e9, 0), f: newFilters()}
	cases := []struct {
		name    string
		s       func(scan) scan
		persons bool
		cmd     bool
	}{
		{"any event", func(s scan) scan { return s }, false, true},
		{"captured names", func(s scan) scan { s.names = []string{"$pageview", "signed_up"}; return s }, false, false},
		{"$set may be a command", func(s scan) scan { s.names = []string{"$pageview", "$set"}; return s }, false, true},
		{"a command name", func(s scan) scan { s.names = []string{"$delete_person"}; return s }, false, true},
		{"person filter", func(s scan) scan { s.f = newFilters(); s.f.person = true; return s }, true, true},
	}
	for _, c := range cases {
		sql, args := c.s(base).sql()
		if strings.Contains(sql, "person_distinct_ids") || !strings.Contains(sql, "person_distinct_id_overrides FINAL") {
			t.Errorf("%s: not read through the overrides: %s", c.name, sql)
		}
		if got := strings.Contains(sql, "FROM persons FINAL"); got != c.persons {
			t.Errorf("%s: reads persons %v, want %v", c.name, got, c.persons)
		}
		if got := strings.Contains(sql, "position(properties"); got != c.cmd {
			t.Errorf("%s: command filter %v, want %v", c.name, got, c.cmd)
		}
		if n := strings.Count(sql, "?"); n != len(args) {
			t.Errorf("%s: %d placeholders, %d args", c.name, n, len(args))
		}
	}
}

// TestPathNamesCutTheScan: a path over named event types cuts the scan by
// those names (PREWHERE), and over any name (no type, custom_event) not.
func TestPathNamesCutTheScan(t *testing.T) {
	cases := []struct {
		query string
		names []string
	}{
		{`include_event_types=["$pageview"]`, []string{"$pageview"}},
		{`include_event_types=["$pageview","$screen"]&include_custom_events=["signed_up"]`, []string{"$pageview", "$screen", "signed_up"}},
		{`include_custom_events=["signed_up"]`, []string{"signed_up"}},
		{`path_type=$screen`, []string{"$screen"}},
		{``, nil},
		{`include_event_types=["$pageview","custom_event"]`, nil},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		p, err := parsePaths(q)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if !slices.Equal(p.names, c.names) {
			t.Errorf("%s: names %q, want %q", c.query, p.names, c.names)
		}
	}
}

// TestLifecycleReadsCreatedAtOnlyForNew: returning and dormant never read
// persons (a returning person was active before, so is not new); new and
// resurrecting read the persons created in the target interval as a set,
// never a join with every person of the project.
func TestLifecycleReadsCreatedAtOnlyForNew(t *testing.T) {
	pv := "$pageview"
	f := &Filter{Interval: Day, Loc: time.UTC, Range: Range{From: time.Unix(1.7e9, 0), To: time.Unix(1.71e9, 0)}}
	s := scan{project: 1, from: f.Range.From, to: f.Range.To, f: newFilters(), where: cond{"event = ?", []any{pv}}, names: []string{pv}}
	for typ, persons := range map[string]bool{"returning": false, "dormant": false, "new": true, "resurrecting": true} {
		sql, args := lifecycleSQL(s, 1, f, time.Unix(1.705e9, 0), typ, Page{Limit: 10})
		if got := strings.Contains(sql, "persons FINAL"); got != persons {
			t.Errorf("%s: reads persons %v, want %v: %s", typ, got, persons, sql)
		}
		if strings.Contains(sql, "AS person_rows USING pid") {
			t.Errorf("%s: joins the project's persons: %s", typ, sql)
		}
		if n := strings.Count(sql, "?"); n != len(args) {
			t.Errorf("%s: %d placeholders, %d args", typ, n, len(args))
		}
	}
}
