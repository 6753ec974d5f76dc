package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/fold"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestPersonSizeLimitInClickHouse: the report's 36 MB person (40 events of
// 900 KB $set each), scaled down: 40 events of 60 KB with a 512 KiB limit.
// The person stays under the limit, each refused event leaves a warning
// naming its key, and every event is stored.
func TestPersonSizeLimitInClickHouse(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	value := strings.Repeat("x", 60_000)
	var events []string
	for i := range 40 {
		events = append(events, fmt.Sprintf(`{"event":"e","distinct_id":"big","$set":{"k%02d":%q}}`, i, value))
	}
	cfg := testConfig("ingester")
	cfg.BatchSize = 7
	if cfg.MaxPersonBytes != 512<<10 {
		t.Fatalf("default limit %d", cfg.MaxPersonBytes)
	}
	publish(t, n.JS, 3, events)
	runUntil(t, cfg, n.JS, store, 40)

	ctx := context.Background()
	list, _, err := store.ListPersons(ctx, chstore.ListQuery{ProjectID: 3})
	if err != nil || len(list) != 1 {
		t.Fatalf("persons: %d, %v", len(list), err)
	}
	raw, _ := json.Marshal(list[0].Properties)
	if len(raw) > cfg.MaxPersonBytes || len(list[0].Properties) != 8 {
		t.Fatalf("person: %d bytes, %d keys", len(raw), len(list[0].Properties))
	}
	rows, err := store.Conn().Query(ctx, "SELECT seq, details FROM ingestion_warnings FINAL WHERE project_id = 3 AND type = ? ORDER BY seq", fold.WarningPersonPropertiesTooLarge)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var warned int
	for rows.Next() {
		var seq uint64
		var details string
		if err := rows.Scan(&seq, &details); err != nil {
			t.Fatal(err)
		}
		var d struct{ Keys []string }
		if err := json.Unmarshal([]byte(details), &d); err != nil || len(d.Keys) != 1 || d.Keys[0] != fmt.Sprintf("k%02d", seq-1) {
			t.Errorf("warning of event %d: %s", seq, details)
		}
		warned++
	}
	if warned != 32 {
		t.Errorf("%d warnings, want 32", warned)
	}
	var stored uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM events FINAL WHERE project_id = 3").Scan(&stored); err != nil || stored != 40 {
		t.Fatalf("events stored: %d, %v", stored, err)
	}
}
