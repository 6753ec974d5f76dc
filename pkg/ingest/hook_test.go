package ingest

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestChainCommandsFoldNothing: a transformation chain command, from the
// API's subject, is taken out of the fold even when the ingester runs no
// hook: no person for its distinct id, no events row; the batch commits.
func TestChainCommandsFoldNothing(t *testing.T) {
	n := testenv.StartNATS(t, "")
	publishMessages(t, n.JS, 7, []testenv.Message{
		{Body: `{"event":"e","distinct_id":"a"}`},
		{Body: `{"event":"$set_transformations","distinct_id":"$transformations","properties":{"$transformations":[]}}`, Command: true},
	})
	store := testenv.ClickHouse(t)
	runUntil(t, testConfig("ingester"), n.JS, store, 2)
	var persons, events uint64
	row := store.Conn().QueryRow(context.Background(), `SELECT
		(SELECT count() FROM person_distinct_ids FINAL WHERE project_id = 7),
		(SELECT count() FROM events FINAL WHERE project_id = 7)`)
	if err := row.Scan(&persons, &events); err != nil {
		t.Fatal(err)
	}
	if persons != 1 || events != 1 {
		t.Fatalf("distinct ids %d, events %d; want 1 and 1 (the command folds nothing)", persons, events)
	}
}
