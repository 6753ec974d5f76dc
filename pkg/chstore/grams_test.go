package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/person"
	"github.com/personhub/personhub/pkg/testenv"
)

// rowsRead is the rows of progressRead (isolation_test.go).
func rowsRead(t *testing.T, fn func(ctx context.Context) error) uint64 {
	t.Helper()
	r, _ := progressRead(t, fn)
	return r
}

// emailPersons writes persons id from..to-1 of project with the email
// and distinct id mk gives, committed (so the project has a live count).
func emailPersons(t *testing.T, store *chstore.Store, project, from, to uint64, mk func(n uint64) (email, did string)) {
	t.Helper()
	ctx := context.Background()
	var b fold.Batch
	for id := from; id < to; id++ {
		email, did := mk(id)
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: project, ID: id, UUID: person.UUIDFor(project, did),
			Properties: map[string]any{"email": email}, DistinctIDs: []string{did}, CreatedAt: time.Unix(1.7e9+int64(id), 0).UTC(), Version: id})
		b.DistinctIDs = append(b.DistinctIDs, fold.DistinctIDRow{ProjectID: project, DistinctID: did, PersonID: id, Version: id, FirstSeq: id})
	}
	if err := store.WriteBatch(ctx, nil, b, chstore.BatchMarker{Consumer: "c", FirstSeq: from, LastSeq: to - 1}); err != nil {
		t.Fatal(err)
	}
}

// TestSearchReadsGramsNotEveryEmail: search= finds an email substring and
// an exact distinct id from the term's rare trigrams (person_email_grams)
// instead of a scan of every email of the project: its statements, and
// the candidates' statement on its own (an IN's reads are not in the
// progress), read fewer rows than half the project's emails.
// A term whose every gram is common still scans, and finds them all.
func TestSearchReadsGramsNotEveryEmail(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const project, n = 3, 100000
	for from := uint64(1); from <= n; from += n / 2 {
		emailPersons(t, store, project, from, from+n/2, func(id uint64) (string, string) {
			return fmt.Sprintf("user%d@Example.com", id), fmt.Sprintf("user_%d", id)
		})
	}
	// Emails the trigrams cannot serve are candidates of every search.
	emailPersons(t, store, project, n+1, n+3, func(id uint64) (string, string) {
		return fmt.Sprintf("Zoë.user%d@example.com", id-n), fmt.Sprintf("zoe_%d", id)
	})
	ids := func(list []chstore.PersonRecord) []uint64 {
		var out []uint64
		for _, p := range list {
			out = append(out, p.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		term string
		want []uint64
	}{
		{"USER12345@", []uint64{12345}},
		{"user_12345", []uint64{12345}},
		{"user1@", []uint64{1, n + 1}},
		{"r9999", []uint64{9999, 99990, 99991, 99992, 99993, 99994, 99995, 99996, 99997, 99998, 99999}},
	} {
		var list []chstore.PersonRecord
		var total uint64
		q := chstore.ListQuery{ProjectID: project, Search: c.term, Limit: 100}
		read := rowsRead(t, func(ctx context.Context) (err error) {
			list, total, err = store.ListPersons(ctx, q)
			return err
		})
		read += rowsRead(t, func(ctx context.Context) error {
			sql, args, err := store.SearchCandidates(ctx, q)
			if err == nil {
				err = store.Conn().Exec(ctx, "SELECT count() FROM ("+sql+")", args...)
			}
			return err
		})
		t.Logf("search=%s: %d rows read", c.term, read)
		if got := ids(list); !slices.Equal(got, c.want) || total != uint64(len(c.want)) {
			t.Errorf("search=%s: %v (count %d), want %v", c.term, got, total, c.want)
		}
		if read > n/2 {
			t.Errorf("search=%s read %d rows: not by key (%d emails)", c.term, read, n)
		}
	}
	_, total, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: project, Search: "example", Limit: 10})
	if err != nil || total != n+2 {
		t.Errorf("search=example: count %d (%v), want %d", total, err, n+2)
	}
}
