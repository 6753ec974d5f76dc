package search_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/chstore/search"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestEmailGramsMigrationMatchesTheIngester: migration 0016's upgrade
// fills person_email_grams from person_emails with exactly the grams and
// lowered emails the ingester writes, for ASCII emails in any case, emails with a non-ASCII
// or invalid UTF-8 byte, short, empty and over-long ones.
func TestEmailGramsMigrationMatchesTheIngester(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	emails := []string{"Alice@Example.COM", "zoë@x.io", "k\u212a@x.io", "bad\xc3@x.io", "bad\x80x.io", "ab", "", "abc", "aaaa",
		strings.Repeat("a", 254), strings.Repeat("b", 255) + "@x.io", "MiXeD.CaSe+tag@Sub.Example.org"}
	var b fold.Batch
	want := map[string]bool{}
	for i, e := range emails {
		id := uint64(i + 1)
		b.Persons = append(b.Persons, fold.PersonRow{ProjectID: 1, ID: id, Properties: map[string]any{"email": e}, CreatedAt: time.Unix(1e9, 0).UTC(), Version: id})
		for _, g := range search.EmailGrams(e) {
			folded := strings.ToLower(e)
			if g == "" {
				folded = ""
			}
			want[fmt.Sprintf("%d %q %q", id, g, folded)] = true
		}
	}
	if err := store.WriteRows(ctx, nil, b); err != nil {
		t.Fatal(err)
	}
	grams := func(table string) map[string]bool {
		rows, err := store.Conn().Query(ctx, "SELECT id, gram, email FROM "+table+" WHERE project_id = 1")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]bool{}
		for rows.Next() {
			var id uint64
			var g, e string
			if err := rows.Scan(&id, &g, &e); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%d %q %q", id, g, e)] = true
		}
		return out
	}
	if got := grams("person_email_grams"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the ingester wrote grams %v, want %v", got, want)
	}
	ms, err := chstore.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// Migration 16's upgrade writes every row again with its email
	// (migration 12's, without, is replaced by it).
	var upgrade string
	for _, m := range ms {
		if m.Version == 16 {
			upgrade = m.Statements[len(m.Statements)-1]
		}
	}
	if !strings.Contains(upgrade, "INSERT INTO person_email_grams") {
		t.Fatalf("migration 16's last statement is not the upgrade: %s", upgrade)
	}
	if err := store.Conn().Exec(ctx, "CREATE TABLE migrated AS person_email_grams"); err != nil {
		t.Fatal(err)
	}
	if err := store.Conn().Exec(ctx, strings.Replace(upgrade, "INSERT INTO person_email_grams", "INSERT INTO migrated", 1)); err != nil {
		t.Fatal(err)
	}
	if got := grams("migrated"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the migration made grams %v, want %v", got, want)
	}
}
