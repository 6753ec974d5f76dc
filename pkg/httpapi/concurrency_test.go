package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
)

// concurrently runs fn(i) for i in [0, n) with at most width at a time.
func concurrently(n, width int, fn func(i int)) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// statusCounts tallies answers by status, safe for concurrent use.
type statusCounts struct {
	mu     sync.Mutex
	counts map[int]int
	sample map[int]string
}

func (s *statusCounts) add(r response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts, s.sample = map[int]int{}, map[int]string{}
	}
	s.counts[r.status]++
	if _, ok := s.sample[r.status]; !ok {
		s.sample[r.status] = string(r.body[:min(len(r.body), 300)])
	}
}

// TestConcurrentReads: 320 reads (list, count with a filter, retrieve,
// search), 64 at a time, on an idle stack: every one answers 200. They
// were 500 "acquire conn timeout" when the pool was smaller than the
// concurrency and ClickHouse refused queries above its limits.
func TestConcurrentReads(t *testing.T) {
	e := newEnv(t)
	seed(e)
	path, _ := e.personPath("p1")
	base := fmt.Sprintf("/api/projects/%d/persons/", e.projectA.ID)
	paths := []string{base, base + "?search=acme", base + `?properties=[{"key":"plan","value":"pro","type":"person"}]`, path, base + "?distinct_id=p2"}
	var got statusCounts
	concurrently(320, 64, func(i int) {
		got.add(e.get(e.keyAll, paths[i%len(paths)]))
	})
	if got.counts[http.StatusOK] != 320 {
		t.Fatalf("answers by status: %v; samples: %v", got.counts, got.sample)
	}
}

// TestConcurrentReadsBesideAHugePerson: project B's reads, 64 at a time,
// while project A holds the widest person the fold writes (properties at
// fold.DefaultMaxPersonBytes) in 20 versions, as $set events leave it
// before parts merge. They were slow (each read the granules of A's
// person) and a third answered 500 "acquire conn timeout". B's persons
// share their granule with A's person (persons are sorted by project and
// id, not partitioned), so B's scanning filters read A's versions there:
// chstore's TestOtherProjectsReadsAreBounded states that bound.
func TestConcurrentReadsBesideAHugePerson(t *testing.T) {
	e := newEnv(t)
	seed(e)
	props := map[string]any{}
	for v := range 20 {
		props[fmt.Sprintf("k%02d", v)] = strings.Repeat("x", fold.DefaultMaxPersonBytes/20-16)
		huge := fold.Batch{Persons: []fold.PersonRow{{ProjectID: e.projectA.ID, ID: 999, UUID: person.UUIDFor(e.projectA.ID, "huge"),
			Properties: props, DistinctIDs: []string{"huge"}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: uint64(1000 + v)}}}
		if err := e.store.WriteRows(context.Background(), nil, huge); err != nil {
			t.Fatal(err)
		}
	}
	base := fmt.Sprintf("/api/projects/%d/persons/", e.projectB.ID)
	paths := []string{base, base + "?search=acme", base + `?properties=[{"key":"email","value":"zero@acme.io","type":"person"}]`, base + "?distinct_id=p0"}
	var got statusCounts
	start := time.Now()
	concurrently(256, 64, func(i int) {
		got.add(e.get(e.keyB, paths[i%len(paths)]))
	})
	if got.counts[http.StatusOK] != 256 {
		t.Fatalf("answers by status: %v; samples: %v", got.counts, got.sample)
	}
	t.Logf("256 reads in %s", time.Since(start))
}

// TestConcurrentPatchesOfOnePerson: 64 PATCHes of different keys of one
// person at once all apply, each answer shows at least its own key, and
// the person has every key at the end.
func TestConcurrentPatchesOfOnePerson(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, _ := e.personPath("p1")
	const n = 64
	var got statusCounts
	var mu sync.Mutex
	var missing []string
	concurrently(n, n, func(i int) {
		key := fmt.Sprintf("k%02d", i)
		r := e.send("PATCH", e.keyAll, path, fmt.Sprintf(`{"properties":{%q:%d}}`, key, i))
		got.add(r)
		if r.status != http.StatusOK {
			return
		}
		if props, _ := r.json(t)["properties"].(map[string]any); props[key] != float64(i) {
			mu.Lock()
			missing = append(missing, key)
			mu.Unlock()
		}
	})
	if got.counts[http.StatusOK] != n {
		t.Fatalf("answers by status: %v; samples: %v", got.counts, got.sample)
	}
	if len(missing) > 0 {
		t.Fatalf("answers lacking their own key: %v", missing)
	}
	props := e.get(e.keyAll, path).json(t)["properties"].(map[string]any)
	for i := range n {
		if key := fmt.Sprintf("k%02d", i); props[key] != float64(i) {
			t.Errorf("key %s: %v", key, props[key])
		}
	}
}

// TestConcurrentReadsAndWrites: both at once.
func TestConcurrentReadsAndWrites(t *testing.T) {
	e := newEnv(t)
	seed(e)
	e.startIngester()
	path, _ := e.personPath("p0")
	base := fmt.Sprintf("/api/projects/%d/persons/", e.projectA.ID)
	var got statusCounts
	concurrently(256, 128, func(i int) {
		if i%2 == 0 {
			got.add(e.send("PATCH", e.keyAll, path, fmt.Sprintf(`{"properties":{"w%03d":%d}}`, i, i)))
		} else {
			got.add(e.get(e.keyAll, base+"?search=acme"))
		}
	})
	if got.counts[http.StatusOK] != 256 {
		t.Fatalf("answers by status: %v; samples: %v", got.counts, got.sample)
	}
}
