package chstore

import (
	"sync"
	"time"
)

// Unfiltered pages kept by the ingester's watermark. The
// unfiltered list is a function of the persons the ingester has written:
// its count (person_counts), its keys and their versions (person_order).
// The API knows where the ingester of a project's partition stands
// without asking ClickHouse: it follows the watermarks the ingester
// publishes after each commit (pkg/progress, the same watch a PATCH
// waits on). While the watermark does not move, no batch of that
// partition has committed, so a page read after the watermark was seen
// is still a page of the store as it stands: it holds every batch up to
// the watermark. So each page's keys, versions and count are kept by the
// watermark read before the page was, and reused while it is unchanged:
// at c=16 on an idle project the first page costs no statement at all
// (each of them ~1 ms of ClickHouse CPU before reading). The
// rows still come from the row cache by version (rowcache.go), read when
// missing, so the page's persons are exact at the versions its keys say.
//
// A page read while a batch was being written may hold part of it (rows
// above the watermark: person_order is written first); so does any page
// read then, cached or not, and the watermark moves once the batch
// commits, which drops the kept pages. A PATCH answers once the
// watermark it waits on (the partition's, or its write lane's) passed
// its command, so the next list of this process sees a new watermark and
// reads again: both watermarks are in the key. Another API process
// follows the same watch; it shows the change once its own watch
// delivers the watermark, as its own PATCHes wait for. markMaxAge bounds
// what no watermark announces (tables rebuilt under a running API, rows
// written outside the ingester), as valueCountsMaxAge does for values/:
// a kept page is read again after it. It is a backstop, not what keeps
// pages fresh (the watermark is), so it is long enough that an idle
// project's pages are read about once a minute.

// markMaxAge is how long a kept page may be reused while the watermark
// does not move.
const markMaxAge = time.Minute

// markPages bounds the pages kept per project (offset, limit pairs), and
// markProjects the projects kept.
const (
	markPages    = 32
	markProjects = 1024
	// markSeenIDs bounds the distinct ids' last seen times kept per
	// project: 32 pages of 1000 persons with a few ids each.
	markSeenIDs = 1 << 16
)

// Watermark is where the ingester of a project's partition stood when a
// request began: its committed sequence and its write lane's
// (pkg/progress). Known is false when the API does not follow them (no
// page is kept).
type Watermark struct {
	Committed, Lane uint64
	Known           bool
}

// after reports whether w is at or past v in both sequences.
func (w Watermark) after(v Watermark) bool { return w.Committed >= v.Committed && w.Lane >= v.Lane }

type pageKey struct{ offset, limit int }

type markedPage struct {
	keys  []pageRow
	total uint64
}

// markEntry is what a project's pages were at one watermark.
type markEntry struct {
	mark  Watermark
	at    time.Time
	count *markedCount
	pages map[pageKey]markedPage
	// reading are the pages being read at mark, closed when read: when
	// the watermark moves, the 16 clients of a busy list would all read
	// the same page at once; one does, the others wait for it.
	reading map[pageKey]chan struct{}
	// seen are the last seen times of distinct ids read at mark
	// (lastseen.go): only an ingester's batch writes events, so they too
	// hold while the watermark does not move (the deleter's rewrites are
	// among the writes markMaxAge bounds).
	seen map[string]seenAt
}

// seenAt is a distinct id's last seen time; ok is false for an id without
// behaviour events.
type seenAt struct {
	t  time.Time
	ok bool
}

type markedCount struct {
	live   uint64
	newest time.Time
}

// markedLists are the projects' entries.
type markedLists struct {
	mu  sync.Mutex
	by  map[uint64]*markEntry
	now func() time.Time
	// hits counts pages answered from here (tests).
	hits uint64
}

func newMarkedLists() *markedLists {
	return &markedLists{by: map[uint64]*markEntry{}, now: time.Now}
}

// current returns the project's entry if it was made at mark and is
// young enough (lock held).
func (m *markedLists) current(project uint64, mark Watermark) *markEntry {
	e := m.by[project]
	if e == nil || e.mark != mark || m.now().Sub(e.at) > markMaxAge {
		return nil
	}
	return e
}

// writable returns the entry to record a read made at mark in, making a
// new one when mark is past the project's entry (or it is old); nil when
// the entry is newer than mark (the read is older: not kept).
func (m *markedLists) writable(project uint64, mark Watermark) *markEntry {
	if e := m.current(project, mark); e != nil {
		return e
	}
	if e := m.by[project]; e != nil && !mark.after(e.mark) && m.now().Sub(e.at) <= markMaxAge {
		return nil
	}
	if len(m.by) >= markProjects {
		for p, e := range m.by {
			if m.now().Sub(e.at) > markMaxAge {
				delete(m.by, p)
			}
		}
		if len(m.by) >= markProjects {
			clear(m.by)
		}
	}
	e := &markEntry{mark: mark, at: m.now(), pages: map[pageKey]markedPage{}, reading: map[pageKey]chan struct{}{}}
	m.by[project] = e
	return e
}

// page returns the keys and count of a page kept at mark.
func (m *markedLists) page(project uint64, mark Watermark, offset, limit int) (markedPage, bool) {
	if m == nil || !mark.Known {
		return markedPage{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.current(project, mark)
	if e == nil {
		return markedPage{}, false
	}
	p, ok := e.pages[pageKey{offset, limit}]
	if ok {
		m.hits++
	}
	return p, ok
}

// putPage keeps a page read after mark was seen. The keys are shared:
// callers never change them.
func (m *markedLists) putPage(project uint64, mark Watermark, offset, limit int, keys []pageRow, total uint64) {
	if m == nil || !mark.Known {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.writable(project, mark)
	if e == nil {
		return
	}
	if len(e.pages) >= markPages {
		clear(e.pages) // a crawl through many pages: start again
	}
	e.pages[pageKey{offset, limit}] = markedPage{keys: keys, total: total}
}

// lastSeen returns the last seen times of the ids kept at mark, and the
// ids it does not know.
func (m *markedLists) lastSeen(project uint64, mark Watermark, ids []string) (map[string]seenAt, []string) {
	if m == nil || !mark.Known {
		return nil, ids
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.current(project, mark)
	if e == nil || e.seen == nil {
		return nil, ids
	}
	found := make(map[string]seenAt, len(ids))
	var missing []string
	for _, id := range ids {
		if v, ok := e.seen[id]; ok {
			found[id] = v
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing
}

// putLastSeen keeps the last seen times of ids read after mark was seen:
// read holds those that have one.
func (m *markedLists) putLastSeen(project uint64, mark Watermark, ids []string, read map[string]time.Time) {
	if m == nil || !mark.Known {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.writable(project, mark)
	if e == nil {
		return
	}
	if e.seen == nil || len(e.seen)+len(ids) > markSeenIDs {
		e.seen = make(map[string]seenAt, len(ids))
	}
	for _, id := range ids {
		t, ok := read[id]
		e.seen[id] = seenAt{t: t, ok: ok}
	}
}

// count returns the project's live count kept at mark.
func (m *markedLists) count(project uint64, mark Watermark) (live uint64, newest time.Time, ok bool) {
	if m == nil || !mark.Known {
		return 0, time.Time{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.current(project, mark)
	if e == nil || e.count == nil {
		return 0, time.Time{}, false
	}
	return e.count.live, e.count.newest, true
}

// putCount keeps the project's live count read after mark was seen.
func (m *markedLists) putCount(project uint64, mark Watermark, live uint64, newest time.Time) {
	if m == nil || !mark.Known {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.writable(project, mark); e != nil {
		e.count = &markedCount{live: live, newest: newest}
	}
}

// claim makes the caller the reader of a page at mark: wait is nil and
// done must be called once the read is over (kept or not); or another
// request is reading it, and wait is closed when it is done (then look
// again: a read that failed or was not kept leaves the next to read).
func (m *markedLists) claim(project uint64, mark Watermark, offset, limit int) (wait <-chan struct{}, done func()) {
	if m == nil || !mark.Known {
		return nil, func() {}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.writable(project, mark)
	if e == nil {
		return nil, func() {}
	}
	k := pageKey{offset, limit}
	if ch, ok := e.reading[k]; ok {
		return ch, nil
	}
	ch := make(chan struct{})
	e.reading[k] = ch
	return nil, func() {
		m.mu.Lock()
		delete(e.reading, k)
		m.mu.Unlock()
		close(ch)
	}
}
