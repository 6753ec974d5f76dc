package chstore

import (
	"sync"
	"time"
)

// The sizes of search='s probed grams (grams.go), kept per process. A
// search probed each of its term's grams (up to six capped counts of
// person_email_grams' key ranges) before reading the rarest: at 50k
// persons about half of the list's time (G5c). The common grams (`use`,
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
}

func newGramSizes() *gramSizes {
	return &gramSizes{by: map[gramSizeKey]gramSize{}, now: time.Now}
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
