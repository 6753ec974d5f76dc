package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// searchIDs is the ids of q's whole result, sorted, and its count.
func searchIDs(t *testing.T, store *chstore.Store, project uint64, term string) ([]uint64, uint64) {
	t.Helper()
	list, total, err := store.ListPersons(context.Background(), chstore.ListQuery{ProjectID: project, Search: term, Limit: 100})
	if err != nil {
		t.Fatalf("search=%s: %v", term, err)
	}
	var out []uint64
	for _, p := range list {
		out = append(out, p.ID)
	}
	slices.Sort(out)
	return out, total
}

// TestSearchTestsTheRarestGramsEmails: search= reads the rows of its
// rarest gram and keeps those whose email contains the term (schema
// 0016), so its candidates are the matching persons (and those the grams
// cannot serve), not every person having the term's trigrams
// (user112345@ has every trigram of user12345@). A changed email's old
// rows stay, and the newest row excludes its person; rows written before
// the email column (email ”) stay candidates; terms under three bytes,
// non-ASCII terms and emails take their paths.
func TestSearchTestsTheRarestGramsEmails(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 4, 20000
	emailPersons(t, store, project, 1, n+1, func(id uint64) (string, string) {
		return fmt.Sprintf("user%d@Example.com", id), fmt.Sprintf("user_%d", id)
	})
	emailPersons(t, store, project, n+1, n+3, func(id uint64) (string, string) {
		return fmt.Sprintf("Zoë.user%d@example.com", id-n), fmt.Sprintf("zoe_%d", id)
	})
	emailPersons(t, store, project, n+3, n+5, func(id uint64) (string, string) {
		return []string{"abcx.xbcd@q.io", "ABCD@q.io"}[id-n-3], fmt.Sprintf("q_%d", id)
	})
	// Person 7 changes its email: its old grams (with the old email)
	// stay; the newest row decides. Under three bytes (r1) the scan
	// finds the rest.
	changed := fold.Batch{Persons: []fold.PersonRow{{ProjectID: project, ID: 7, Properties: map[string]any{"email": "Renamed@Other.org"},
		DistinctIDs: []string{"user_7"}, CreatedAt: time.Unix(1.7e9+7, 0).UTC(), Version: n + 10}}}
	if err := store.WriteBatch(ctx, nil, changed, chstore.BatchMarker{Consumer: "c", FirstSeq: n + 10, LastSeq: n + 10}); err != nil {
		t.Fatal(err)
	}
	// Person 12346's grams as written before schema 0016 (no email): a
	// candidate of its grams' every search, found by its newest row.
	if err := store.Conn().Exec(ctx, `INSERT INTO person_email_grams (project_id, gram, id, version)
		SELECT ?, arrayJoin(['use', 'ser', 'er1', 'r12', '123', '234', '346', '46@', '6@e']), 99999, 1`, project); err != nil {
		t.Fatal(err)
	}
	candidates := func(term string) int {
		sql, args, err := store.SearchCandidates(ctx, chstore.ListQuery{ProjectID: project, Search: term})
		if err != nil {
			t.Fatal(err)
		}
		var c uint64
		if err := store.Conn().QueryRow(ctx, "SELECT count() FROM ("+sql+")", args...).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return int(c)
	}
	for _, c := range []struct {
		term  string
		want  []uint64
		cands int // at most
	}{
		{"USER12345@", []uint64{12345}, 1 + 2 + 1},    // + the two gram '' rows, and the emailless row when the gram read is one of its
		{"user7@example", nil, 0 + 2 + 1},             // the old email's row is a candidate, not a match
		{"renamed@", []uint64{7}, 1 + 2},              // the new email
		{"d@o", []uint64{7}, 1 + 2},                   // three bytes
		{"abcd", []uint64{n + 4}, 1 + 2},              // abcx.xbcd@ has its trigrams, not it
		{"user_123", []uint64{123}, 0 + 2 + 1},        // a distinct id, no email has _
		{"ë.USER1@", []uint64{n + 1}, n + 2},          // not ASCII: the scan
		{"user1@example.com", []uint64{1, n + 1}, 10}, // Zoë's is a gram '' candidate
	} {
		got, total := searchIDs(t, store, project, c.term)
		if !slices.Equal(got, c.want) || total != uint64(len(c.want)) {
			t.Errorf("search=%s: %v (count %d), want %v", c.term, got, total, c.want)
		}
		if k := candidates(c.term); k > c.cands {
			t.Errorf("search=%s: %d candidates, want at most %d", c.term, k, c.cands)
		}
	}
	if got, total := searchIDs(t, store, project, "r1"); total != 11112 || len(got) != 100 {
		t.Errorf("search=r1: count %d, %d on the page, want 11112 (user1..user19999 and Zoë.user1) and 100", total, len(got))
	}
	// The row without an email is read: person 99999 does not exist,
	// so it is a candidate and no result.
	if k := candidates("ser12346@"); k != 1+1+2 {
		t.Errorf("search=ser12346@: %d candidates, want 12346, the emailless row and the gram '' rows", k)
	}
}
