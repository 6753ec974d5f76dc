package cohort

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/personhub/personhub/pkg/kvjson"
)

// CountMaxAge is how old a member count persons/cohorts/ answers with may
// be before it is recalculated. Membership itself is always evaluated
// when read; a count is a scan of the whole project (of its events, for a
// behavioural cohort), which one person's lookup cannot afford at every
// request, so persons/cohorts/ answers with the count of the last
// calculation (its last_calculation) and recalculates it in the
// background once it is older than this (is_calculating true meanwhile),
// as PostHog serves the count of the last calculation (docs/cohorts.md).
const CountMaxAge = time.Minute

// countRefreshTimeout bounds a background recalculation.
const countRefreshTimeout = 5 * time.Minute

// countCache holds the last count of each cohort, per project. The zero
// value is ready. Entries are replaced, never added per definition, and
// dropped when their cohort is deleted, so it holds one small entry per
// live cohort counted.
type countCache struct {
	mu sync.Mutex
	m  map[[2]uint64]*countEntry
}

type countEntry struct {
	def        [sha256.Size]byte // digest of the definition counted: another is not this count
	count      *uint64
	at         time.Time
	refreshing bool
}

// definition identifies what a count is of: a PATCH of the filters makes
// the count of the old ones useless. A digest, not the filters (up to the
// cohort body limit, 8 MiB), so an entry stays small.
func definition(c Cohort) [sha256.Size]byte {
	if c.IsStatic {
		return sha256.Sum256([]byte("static"))
	}
	return sha256.Sum256(append([]byte("dynamic:"), c.Filters...))
}

// put remembers a count calculated at v.CalculatedAt, unless a later one
// is known.
func (cc *countCache) put(projectID uint64, v View) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[[2]uint64]*countEntry{}
	}
	key := [2]uint64{projectID, v.ID}
	if e, ok := cc.m[key]; ok && e.def == definition(v.Cohort) && e.at.After(v.CalculatedAt) {
		return
	}
	cc.m[key] = &countEntry{def: definition(v.Cohort), count: v.Count, at: v.CalculatedAt}
}

// get returns the remembered count of c, and whether this caller should
// recalculate it (it is older than CountMaxAge and nobody else is).
func (cc *countCache) get(projectID uint64, c Cohort, now time.Time) (v View, found, refresh bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.m[[2]uint64{projectID, c.ID}]
	if !ok || e.def != definition(c) {
		return View{}, false, false
	}
	if now.Sub(e.at) > CountMaxAge && !e.refreshing {
		e.refreshing, refresh = true, true
	}
	return View{Cohort: c, Count: e.count, CalculatedAt: e.at, Calculating: e.refreshing}, true, refresh
}

// drop forgets the count of a cohort (deleted).
func (cc *countCache) drop(projectID, id uint64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	delete(cc.m, [2]uint64{projectID, id})
}

// done clears the refreshing marks of a recalculation that failed, so
// the next read tries again.
func (cc *countCache) done(projectID uint64, cohorts []Cohort) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range cohorts {
		if e, ok := cc.m[[2]uint64{projectID, c.ID}]; ok {
			e.refreshing = false
		}
	}
}

// cachedCounts adds to each cohort its last count: calculated now when
// none is known, recalculated in the background when it is older than
// CountMaxAge.
func (s *Service) cachedCounts(ctx context.Context, projectID uint64, cohorts []Cohort) ([]View, error) {
	out := make([]View, len(cohorts))
	var missing, stale []Cohort
	var missingAt []int
	now := s.now()
	for i, c := range cohorts {
		v, found, refresh := s.countCache.get(projectID, c, now)
		switch {
		case !found:
			missing, missingAt = append(missing, c), append(missingAt, i)
		case refresh:
			stale = append(stale, c)
		}
		out[i] = v
	}
	if len(missing) > 0 {
		views, err := s.withCounts(ctx, projectID, missing)
		if err != nil {
			return nil, err
		}
		for j, i := range missingAt {
			out[i] = views[j]
		}
	}
	if len(stale) > 0 {
		// Detached from the request (which ends first), bounded by its own
		// timeout and stopped by Close; a failure leaves the old count,
		// retried by a later read.
		started := s.refreshes.start(func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, countRefreshTimeout)
			defer cancel()
			if _, err := s.withCounts(ctx, projectID, stale); err != nil {
				s.countCache.done(projectID, stale)
			}
		})
		if !started {
			s.countCache.done(projectID, stale)
		}
	}
	return out, nil
}

// background runs the service's background work (count refreshes) so that
// Close can stop it: cancelled, then waited for, before the ClickHouse
// connection it uses is closed.
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newBackground() *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel}
}

// start runs f in a goroutine with the background's context; false (f not
// run) once closed.
func (b *background) start(f func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
	return true
}

// close cancels the running work, waits for it, and refuses new work.
func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.wg.Wait()
}

// definitions caches each project's cohort records (soft-deleted ones
// too) as of a version of the bucket (kvjson.Records.Version): every read
// asks the server for the version, one request, and lists the records
// again only when it moved, so persons/cohorts/ reads the definitions a
// write made anywhere, at once, without a listing per request. The zero
// value is ready; one small entry per project read.
type definitions struct {
	mu    sync.Mutex
	m     map[uint64]definitionsAt
	lists int // listings made (tests)
}

type definitionsAt struct {
	version uint64
	records []Cohort
}

// list returns a copy of the project's records (callers filter in place).
func (d *definitions) list(ctx context.Context, records *kvjson.Records[Cohort], projectID uint64) ([]Cohort, error) {
	// Read before listing: a write during the listing moves the version
	// past this one, so the next read lists again.
	version, err := records.Version(ctx)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	cached, ok := d.m[projectID]
	d.mu.Unlock()
	if ok && cached.version == version {
		return slices.Clone(cached.records), nil
	}
	all, err := records.List(ctx, projectID)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lists++
	if d.m == nil {
		d.m = map[uint64]definitionsAt{}
	}
	if cur, ok := d.m[projectID]; !ok || cur.version <= version {
		d.m[projectID] = definitionsAt{version, slices.Clone(all)}
	}
	return all, nil
}
