package fold

import (
	"context"
	"fmt"
)

// Projects held whole. A step of a cold cache (a start, a refold, a
// replay, a cache that evicted) misses thousands of a project's distinct
// ids and their persons; the store finds each step's keys by reading
// every granule of the project, as random keys touch them all, so a cold
// project of 2M persons costs a full read of it per step (1.3-1.6 s at
// 10x, docs/performance.md). When a step misses at least DenseMisses of
// a project's ids, the Folder reads the whole project once instead
// (ProjectLoader) and, from then on, holds it whole: every stored row of
// the project is in the cache, so an id or person not in the cache is
// not in the store either, and no step of the project reads the store.
//
// A project stays whole while nothing of it leaves the cache: Reset and
// an eviction that drops any of its entries end it. Every row the Folder
// writes for the project is in the cache as it writes it, and the
// project's rows have no other writer (a project's messages are one
// ingester's, docs/architecture.md). Loaded rows go through the same
// views as rows read by key (storedView, storedProps), so a project read
// whole folds as it would read row by row.
//
// A project is read whole only when it fits in the room the cache has
// beside the other projects' entries (MaxCached less those), so that a
// read never holds more than MaxCached entries: with less room than a
// step's dense misses it is not tried, and the read stops at the first
// row past the room. A project is read (or tried) again no sooner than
// wholeSpacing steps after the last time: at worst one read of it per
// wholeSpacing steps, against one per step row by row.

// ProjectLoader is a Loader that can read a project whole.
type ProjectLoader interface {
	// LoadProject calls did and person with every stored row of the
	// project, newest version of each, unless it holds more than limit
	// distinct id or person rows (limit 0: no bound). It reports whether
	// it read the project; false with a nil error when it is too large
	// (some rows may have been handed out).
	LoadProject(ctx context.Context, projectID uint64, limit int, did func(DistinctIDRow), person func(PersonRow)) (bool, error)
}

// DefaultDenseMisses is the misses of one project in one step that make
// the Folder read the project whole.
const DefaultDenseMisses = 1000

// defaultDense is what DenseMisses zero means: DefaultDenseMisses, which
// the package's tests lower to read projects whole at every step.
var defaultDense = DefaultDenseMisses

// wholeSpacing is the fewest steps between two reads of a project.
const wholeSpacing = 50

// wholeProjects is the Folder's record of the projects it holds whole.
type wholeProjects struct {
	held map[uint64]bool
	// read is the step (Folder.gen) of each project's last read or
	// attempt, until Reset.
	read map[uint64]uint64
}

func newWholeProjects() wholeProjects {
	return wholeProjects{held: map[uint64]bool{}, read: map[uint64]uint64{}}
}

// WholeLoads reports how many times the Folder read a project whole
// (Reset does not clear it).
func (f *Folder) WholeLoads() int { return f.wholeLoads }

// heldWhole reports whether the cache holds every stored row of project.
func (f *Folder) heldWhole(project uint64) bool { return f.whole.held[project] }

// cachedOutside is the most entries of either table the cache holds of
// projects other than project.
func (f *Folder) cachedOutside(project uint64) int {
	var p, d int
	for k := range f.persons {
		if k.project != project {
			p++
		}
	}
	for k := range f.dids {
		if k.project != project {
			d++
		}
	}
	return max(p, d)
}

// lostWhole ends project's wholeness: an entry of it left the cache.
func (f *Folder) lostWhole(project uint64) { delete(f.whole.held, project) }

// maybeLoadWhole reads project whole when a step misses dense of its
// distinct ids and the rules above allow it.
func (f *Folder) maybeLoadWhole(ctx context.Context, project uint64, misses int) error {
	w := &f.whole
	dense := f.DenseMisses
	if dense == 0 {
		dense = defaultDense
	}
	pl, ok := f.loader.(ProjectLoader)
	if !ok || dense < 0 || misses < dense || w.held[project] {
		return nil
	}
	if last, ok := w.read[project]; ok && f.gen-last < wholeSpacing {
		return nil
	}
	w.read[project] = f.gen
	limit := 0
	if f.MaxCached > 0 {
		if limit = f.MaxCached - f.cachedOutside(project); limit < dense {
			return nil // no room: row by row
		}
	}
	read, err := pl.LoadProject(ctx, project, limit, func(r DistinctIDRow) {
		k := didKey{project, r.DistinctID}
		if _, ok := f.dids[k]; !ok {
			f.dids[k] = &didState{row: f.storedView(k, r), used: f.gen}
		}
	}, func(r PersonRow) {
		k := personKey{project, r.ID}
		if _, ok := f.persons[k]; !ok {
			storedProps(&r)
			f.persons[k] = &personState{row: r, used: f.gen, stored: r.CreatedAt}
			delete(f.absent, k)
		}
	})
	if err != nil {
		return fmt.Errorf("load project %d whole: %w", project, err)
	}
	if !read {
		return nil // larger than the room
	}
	w.held[project] = true
	f.wholeLoads++
	return nil
}
