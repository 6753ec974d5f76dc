package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ReadStatement is one statement shape the API sent while one list read
// ran alone (S3's breakdown): how often, how long in ClickHouse, and how
// much it read, per call.
type ReadStatement struct {
	Read      string  `json:"read"`
	Statement string  `json:"statement"` // literals as ?, lists of them as (…)
	Calls     int     `json:"calls"`
	MeanMs    float64 `json:"mean_ms"`
	P99Ms     float64 `json:"p99_ms"`
	ReadRows  float64 `json:"read_rows"`  // mean per call
	ReadBytes float64 `json:"read_bytes"` // mean per call
	// The parts and marks (granules) its reads selected, mean per call,
	// from query_log's profile events.
	SelectedParts float64 `json:"selected_parts"`
	SelectedMarks float64 `json:"selected_marks"`
}

// s3BreakdownCalls is the calls of each read in its breakdown window.
const s3BreakdownCalls = 200

// readWindow is one read's breakdown window, whole seconds as
// query_log's query_start_time has them.
type readWindow struct {
	read       string
	from, till time.Time
	calls      int
}

// scaleBreakdown runs each list read alone, sequentially, once more
// after S3's interleaved measurement: the API's CPU is profiled over
// each read (api-s3-<read>-<persons>.cpu.pprof) and ClickHouse's
// query_log gives each statement the read sent, with its time and the
// rows and bytes it read. The windows are more than a second apart, so
// query_log's start times in seconds tell them apart; nothing else runs
// then but the idle ingester, whose statements are few and stand apart
// (fewer calls than the read's).
func (s *session) scaleBreakdown(ctx context.Context, persons uint64, reads []namedOp) []ReadStatement {
	if !s.ch.queryLog {
		return nil
	}
	var windows []readWindow
	for _, r := range reads {
		time.Sleep(1100 * time.Millisecond)
		w := readWindow{read: strings.TrimSuffix(r.name, layerAPI), from: time.Now().Truncate(time.Second)}
		stop := s.api.cpuProfile(s.profile(fmt.Sprintf("api-s3-%s-%dk.cpu.pprof", fileSafe(w.read), persons/1000)))
		sm := r.measure(ctx, 1, budget{N: s3BreakdownCalls, Max: time.Minute}, 0)
		stop()
		w.till, w.calls = time.Now(), len(sm.lat)
		windows = append(windows, w)
		l := summarize(sm.lat)
		s.lg.f("S3 breakdown %d persons, %s alone: %d calls, p50 %.2f ms, p99 %.2f ms", persons, w.read, l.N, l.P50ms, l.P99ms)
	}
	// The API's heap after the reads: what it holds at this size (its
	// caches), which its collections mark.
	_ = s.api.proc.heapProfile(s.profile(fmt.Sprintf("api-s3-%dk.heap.pprof", persons/1000)))
	s.lg.f("S3 breakdown %d persons: the API's heap in use %.0f MiB, %.0f GC cycles so far", persons,
		s.api.proc.metric("go_memstats_heap_inuse_bytes")/(1<<20), s.api.proc.metric("go_gc_duration_seconds_count"))
	time.Sleep(1100 * time.Millisecond)
	if err := s.store.Conn().Exec(rawCtx(ctx), "SYSTEM FLUSH LOGS"); err != nil {
		s.lg.f("S3 breakdown: flushing query_log: %v", err)
		return nil
	}
	var out []ReadStatement
	for _, w := range windows {
		sts, err := s.windowStatements(ctx, w)
		if err != nil {
			s.lg.f("S3 breakdown of %s: %v", w.read, err)
			continue
		}
		for _, st := range sts {
			s.lg.f("S3 breakdown %d persons, %s: %d× %.2f ms mean, p99 %.2f ms, %.0f rows, %.0f B read, %.1f parts, %.1f marks selected: %s",
				persons, w.read, st.Calls, st.MeanMs, st.P99Ms, st.ReadRows, st.ReadBytes, st.SelectedParts, st.SelectedMarks, st.Statement)
		}
		out = append(out, sts...)
	}
	return out
}

// windowStatements groups the statements that finished in w's window by
// shape, keeping those sent on at least a tenth of the read's calls.
func (s *session) windowStatements(ctx context.Context, w readWindow) ([]ReadStatement, error) {
	event := s.profileEventSQL(ctx)
	rows, err := s.store.Conn().Query(rawCtx(ctx), `SELECT query, query_duration_ms, read_rows, read_bytes, `+
		event("SelectedParts")+", "+event("SelectedMarks")+`
FROM system.query_log
WHERE type = 2 AND query_start_time >= toDateTime(?) AND query_start_time <= toDateTime(?)
  AND query NOT LIKE '%system.query_log%'`, w.from.Unix(), w.till.Unix())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	type acc struct {
		ms                        []float64
		rows, bytes, parts, marks float64
	}
	by := map[string]*acc{}
	for rows.Next() {
		var q string
		var ms, rr, rb, parts, marks uint64
		if err := rows.Scan(&q, &ms, &rr, &rb, &parts, &marks); err != nil {
			return nil, err
		}
		k := statementShape(q)
		a := by[k]
		if a == nil {
			a = &acc{}
			by[k] = a
		}
		a.ms = append(a.ms, float64(ms))
		a.rows += float64(rr)
		a.bytes += float64(rb)
		a.parts += float64(parts)
		a.marks += float64(marks)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []ReadStatement
	for k, a := range by {
		n := len(a.ms)
		if n*10 < w.calls {
			continue
		}
		slices.Sort(a.ms)
		var sum float64
		for _, v := range a.ms {
			sum += v
		}
		out = append(out, ReadStatement{Read: w.read, Statement: k, Calls: n, MeanMs: sum / float64(n),
			P99Ms: a.ms[min(n-1, n*99/100)], ReadRows: a.rows / float64(n), ReadBytes: a.bytes / float64(n),
			SelectedParts: a.parts / float64(n), SelectedMarks: a.marks / float64(n)})
	}
	slices.SortFunc(out, func(a, b ReadStatement) int { return -cmpFloat(a.MeanMs*float64(a.Calls), b.MeanMs*float64(b.Calls)) })
	return out, nil
}

// profileEventSQL gives the expression of one of query_log's profile
// events: ClickHouse 18.16 keeps them as two arrays (ProfileEvents.Names,
// ProfileEvents.Values), current ClickHouse as a Map column,
// ProfileEvents. The column's type in system.columns tells which. (The
// finished statements are type = 2 in both: a UInt8 in 18.16, the
// Enum8 value QueryFinish now.)
func (s *session) profileEventSQL(ctx context.Context) func(name string) string {
	var typ string
	_ = s.store.Conn().QueryRow(rawCtx(ctx), `SELECT any(type) FROM system.columns
WHERE database = 'system' AND table = 'query_log' AND name = 'ProfileEvents'`).Scan(&typ)
	if strings.HasPrefix(typ, "Map(") {
		return func(name string) string { return "ProfileEvents['" + name + "']" }
	}
	return func(name string) string {
		return "ProfileEvents.Values[indexOf(ProfileEvents.Names, '" + name + "')]"
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var (
	shapeString = regexp.MustCompile(`'(?:[^'\\]|\\.|'')*'`)
	shapeNumber = regexp.MustCompile(`\b\d+(?:\.\d+)?\b`)
	shapeList   = regexp.MustCompile(`\(\s*\?(?:\s*,\s*\?)*\s*\)`)
	shapeSpace  = regexp.MustCompile(`\s+`)
)

// statementShape is a statement with its literals as ? and a
// parenthesised list of them, of any length, as (…), so the calls of one
// statement with different values group together.
func statementShape(q string) string {
	q = shapeString.ReplaceAllString(q, "?")
	q = shapeNumber.ReplaceAllString(q, "?")
	q = shapeList.ReplaceAllString(q, "(…)")
	return strings.TrimSpace(shapeSpace.ReplaceAllString(q, " "))
}

// fileSafe is a read's name as part of a file name.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, name)
}
