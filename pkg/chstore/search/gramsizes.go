package search

import (
	"context"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// The sizes of search='s probed grams (grams.go), kept per process. A
// search probed each of its term's grams (up to six capped counts of
// person_email_grams' key ranges) before reading the rarest: at 50k
// persons about half of the list's time. The common grams (`use`,
// `com`, `@ex`) come back in nearly every term, and a gram's size moves
// slowly, so a count is kept for gramSizeLife. A stale size may pick a
// gram that has since grown, which costs the search more reads, never a
// wrong answer: every candidate is tested on the newest row.

const (
	gramSizeLife = 5 * time.Minute
	// gramSizesMax bounds the entries (about 80 bytes each): all of them
	// are dropped when it is reached, and probed again as needed.
	gramSizesMax = 1 << 16
)

type gramSizeKey struct {
	project uint64
	gram    string
}

type gramSize struct {
	n, limit uint64
	at       time.Time
}

type gramSizes struct {
	mu  sync.Mutex
	by  map[gramSizeKey]gramSize
	now func() time.Time
	// censuses are whole projects' sizes (below); load reads one.
	censuses     map[uint64]*census
	censusGrams  int
	load         func(ctx context.Context, project uint64) (map[string]uint64, error)
	censusLoaded func(project uint64) // tests: a load ended
	// probes counts the statements of capped counts (sizesOf).
	probes int
}

func newGramSizes(load func(ctx context.Context, project uint64) (map[string]uint64, error)) *gramSizes {
	return &gramSizes{by: map[gramSizeKey]gramSize{}, now: time.Now, censuses: map[uint64]*census{}, load: load}
}

// get returns the kept sizes of grams in project, as counts capped at
// limit, and the grams it has no current size for. A size counted under
// another cap serves only where both caps agree on it: below both.
func (g *gramSizes) get(project uint64, grams []string, limit uint64) (map[string]uint64, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	sizes := make(map[string]uint64, len(grams))
	var missing []string
	for _, gram := range grams {
		e, ok := g.by[gramSizeKey{project, gram}]
		switch {
		case !ok || now.Sub(e.at) >= gramSizeLife:
			missing = append(missing, gram)
		case e.n >= limit:
			sizes[gram] = limit // the size is at least e.n
		case e.n < e.limit:
			sizes[gram] = e.n // exact, under both caps
		default:
			missing = append(missing, gram) // at a lower cap than this one
		}
	}
	return sizes, missing
}

// put keeps gram's count n in project, capped at limit.
func (g *gramSizes) put(project uint64, gram string, n, limit uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.by) >= gramSizesMax {
		clear(g.by)
	}
	g.by[gramSizeKey{project, gram}] = gramSize{n: n, limit: limit, at: g.now()}
}

// A project's census: the size of every gram of at least censusFloor rows
// in person_email_grams, from one grouped read in the background. Even
// with kept sizes, a search whose term brought a gram not probed lately
// paid a statement of up to six capped counts (at 50k persons ~6 ms of
// the search's ~13: each count is a subquery with its own index
// analysis), and terms vary (every user's address has its own digits).
// With the census a search probes nothing: a gram it does not list has
// fewer than censusFloor rows, as cheap to read as any. The census is
// read when a search first needs it and again once it is gramSizeLife
// old; meanwhile the probes serve (and the old census, up to
// censusMaxAge). The read is one pass over the project's gram column
// (~20 rows per person with an email: at 1M persons ~20M rows, a second
// or two of one ClickHouse thread every five minutes while searches
// come); the sizes held are the grams above the floor, a few thousand
// for real addresses.
const (
	censusFloor  = 64
	censusMaxAge = 30 * time.Minute
	// censusRetry spaces the loads after a failed one.
	censusRetry = 30 * time.Second
	// censusGramsMax bounds the grams held over all projects (some 60
	// bytes each): a census that would pass it drops the others.
	censusGramsMax = 1 << 20
	censusTimeout  = 2 * time.Minute
)

type census struct {
	sizes    map[string]uint64
	at       time.Time // read at (zero: never)
	loading  bool
	failedAt time.Time
}

// fromCensus returns the sizes of grams from project's census (a gram it
// does not list: 0, under the floor), or false when it has none young
// enough; it starts a load when the census is missing or old.
func (g *gramSizes) fromCensus(project uint64, grams []string) (map[string]uint64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	c := g.censuses[project]
	if c == nil {
		c = &census{}
		g.censuses[project] = c
	}
	if !c.loading && (c.at.IsZero() || now.Sub(c.at) >= gramSizeLife) && (c.failedAt.IsZero() || now.Sub(c.failedAt) >= censusRetry) {
		c.loading = true
		go g.loadCensus(project)
	}
	if c.at.IsZero() || now.Sub(c.at) >= censusMaxAge {
		return nil, false
	}
	sizes := make(map[string]uint64, len(grams))
	for _, gram := range grams {
		sizes[gram] = c.sizes[gram]
	}
	return sizes, true
}

// loadCensus reads project's census and keeps it.
func (g *gramSizes) loadCensus(project uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), censusTimeout)
	defer cancel()
	sizes, err := g.load(ctx, project)
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.censuses[project]
	if c == nil { // dropped meanwhile
		c = &census{}
		g.censuses[project] = c
	}
	c.loading = false
	switch {
	case err != nil:
		c.failedAt = g.now()
	case len(sizes) > censusGramsMax:
		c.failedAt = g.now() // too many to hold: the probes serve
	default:
		g.censusGrams -= len(c.sizes)
		if g.censusGrams+len(sizes) > censusGramsMax {
			clear(g.censuses)
			g.censuses[project] = c
			g.censusGrams = 0
		}
		c.sizes, c.at, c.failedAt = sizes, g.now(), time.Time{}
		g.censusGrams += len(sizes)
	}
	if g.censusLoaded != nil {
		g.censusLoaded(project)
	}
}

// readCensus reads the size of each gram of at least censusFloor rows in
// project's person_email_grams (rows, as the probes count them: old
// versions too, which a search's read passes over as well). One thread,
// at statement.BackgroundPriority: it pauses while the API's reads by key run.
func (x *Index) readCensus(ctx context.Context, project uint64) (map[string]uint64, error) {
	rows, err := x.conn.Query(statement.Bound(ctx, clickhouse.Settings{"max_threads": 1, "priority": statement.BackgroundPriority}), `SELECT gram, count() AS n FROM person_email_grams
		WHERE project_id = ? AND gram != '' GROUP BY gram HAVING n >= ?`, project, uint64(censusFloor))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sizes := map[string]uint64{}
	for rows.Next() {
		var gram string
		var n uint64
		if err := rows.Scan(&gram, &n); err != nil {
			return nil, err
		}
		sizes[gram] = n
	}
	return sizes, rows.Err()
}

// Probes is how many statements of capped gram counts the index has made
// (the tests of the census watch it).
func (x *Index) Probes() int {
	x.sizes.mu.Lock()
	defer x.sizes.mu.Unlock()
	return x.sizes.probes
}

// WatchCensus calls loaded when a project's census load ends and, when
// aged, runs the census clock gramSizeLife ahead, so that every census
// read is old; for the tests of the census.
func (x *Index) WatchCensus(loaded func(project uint64), aged bool) {
	age := time.Duration(0)
	if aged {
		age = gramSizeLife
	}
	x.sizes.mu.Lock()
	defer x.sizes.mu.Unlock()
	x.sizes.censusLoaded = loaded
	x.sizes.now = func() time.Time { return time.Now().Add(age) }
}
