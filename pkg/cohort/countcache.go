package cohort

import (
	"context"
	"sync"
	"time"
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
// value is ready. Entries are replaced, never added per definition, so it
// holds one entry per cohort.
type countCache struct {
	mu sync.Mutex
	m  map[[2]uint64]*countEntry
}

type countEntry struct {
	def        string // the definition counted: another is not this count
	count      *uint64
	at         time.Time
	refreshing bool
}

// definition identifies what a count is of: a PATCH of the filters makes
// the count of the old ones useless.
func definition(c Cohort) string {
	if c.IsStatic {
		return "static"
	}
	return string(c.Filters)
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
		// timeout; a failure leaves the old count, retried by a later read.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), countRefreshTimeout)
			defer cancel()
			if _, err := s.withCounts(ctx, projectID, stale); err != nil {
				s.countCache.done(projectID, stale)
			}
		}()
	}
	return out, nil
}
