package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestGramCensusSparesTheProbes: the first search of a project probes its
// grams' sizes (a statement) and starts the census; once it is read,
// searches with grams never probed make no probe, pick the exact rarest
// gram (its candidates are the matches), and find what they found
// before. A census gramSizeLife old is read again in the background while
// it still serves.
func TestGramCensusSparesTheProbes(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 6, 5000
	emailPersons(t, store, project, 1, n+1, func(id uint64) (string, string) {
		return fmt.Sprintf("user%d@Example.com", id), fmt.Sprintf("user_%d", id)
	})
	loaded := make(chan uint64, 4)
	store.OnGramCensus(func(p uint64) { loaded <- p }, false)
	wait := func() {
		t.Helper()
		select {
		case p := <-loaded:
			if p != project {
				t.Fatalf("census of project %d, want %d", p, project)
			}
		case <-time.After(time.Minute):
			t.Fatal("no census read")
		}
	}
	search := func(term string, want ...uint64) {
		t.Helper()
		got, total := searchIDs(t, store, project, term)
		if !slices.Equal(got, want) || total != uint64(len(want)) {
			t.Fatalf("search=%s: %v (count %d), want %v", term, got, total, want)
		}
	}
	search("user1234@", 1234)
	if p := store.GramProbes(); p != 1 {
		t.Fatalf("%d probes before the census, want 1", p)
	}
	wait()
	// Grams not probed yet: 4321's digits, "r43", "21@", "43@".
	search("user4321@", 4321)
	search("USER999@", 999)
	search("r43@", 43)
	if p := store.GramProbes(); p != 1 {
		t.Fatalf("%d probes with the census, want 1", p)
	}
	// The census's choice: "r49" names user49, user490..499 and
	// user4900..4999 (111 rows, listed), "490" and "90@" fewer than the
	// floor (not listed: 0), so "490" is read (the first by name), and
	// its one row containing the term is the candidate.
	sql, args, err := store.SearchCandidates(ctx, chstore.ListQuery{ProjectID: project, Search: "r490@"})
	if err != nil {
		t.Fatal(err)
	}
	var c uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM ("+sql+")", args...).Scan(&c); err != nil {
		t.Fatal(err)
	}
	if c != 1 {
		t.Errorf("search=r490@: %d candidates, want 1 (user490's row of the rarest gram)", c)
	}
	// Old: read again, and served meanwhile.
	store.OnGramCensus(func(p uint64) { loaded <- p }, true)
	search("user77@", 77)
	wait()
	search("user3210@", 3210)
	if p := store.GramProbes(); p != 1 {
		t.Fatalf("%d probes around the census's refresh, want 1", p)
	}
}
