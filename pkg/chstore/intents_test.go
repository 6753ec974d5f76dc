package chstore_test

import (
	"context"
	"testing"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestIntents: the highest sequence a consumer's intents cover.
func TestIntents(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	for _, w := range []struct {
		consumer       string
		first, through uint64
	}{{"a", 1, 120}, {"a", 121, 90}, {"b", 1, 500}} {
		if err := store.WriteIntent(ctx, w.consumer, w.first, w.through); err != nil {
			t.Fatal(err)
		}
	}
	for consumer, want := range map[string]uint64{"a": 120, "b": 500, "c": 0} {
		if got, err := store.LastIntent(ctx, consumer); err != nil || got != want {
			t.Fatalf("LastIntent(%s) = %d, %v; want %d", consumer, got, err, want)
		}
	}
}
