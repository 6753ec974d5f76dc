package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/testenv"
)

// TestSettleWriterWaitsForTheConsumersInserts: an insert a writer started
// and has not finished (as a killed ingester's last insert may still be
// running on the server) keeps SettleWriter waiting; once it returns, the
// insert has ended (landed, or killed where the server can kill an
// insert) and nothing of it lands later. Another consumer's insert,
// running beside it, neither holds the wait nor is ended.
func TestSettleWriterWaitsForTheConsumersInserts(t *testing.T) {
	store := testenv.ClickHouse(t)
	ctx := context.Background()
	const insert = `INSERT INTO ingest_intents (consumer, first_seq, through_seq, written_at)`
	open := func(consumer string) interface{ Send() error } {
		t.Helper()
		b, err := store.Conn().PrepareBatch(chstore.AsWriter(ctx, consumer), insert)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(consumer, uint64(1), uint64(2), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		return b
	}
	running := func(consumer string) uint64 {
		t.Helper()
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT count() FROM system.processes WHERE query_id LIKE ?", "personhub-ingester/"+store.Database()+"/"+consumer+"/%").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	intent := func(consumer string) uint64 {
		t.Helper()
		seq, err := store.LastIntent(ctx, consumer)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	killed, other := open("killed"), open("other")
	if running("killed") != 1 || running("other") != 1 {
		t.Fatalf("running before: killed %d, other %d; want 1 each", running("killed"), running("other"))
	}
	done := make(chan error, 1)
	go func() { done <- store.SettleWriter(ctx, "killed") }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		if n := running("killed"); n > 0 {
			t.Fatalf("SettleWriter returned (%v) while the consumer's insert runs", err)
		}
		// Ended by the kill (a server that kills inserts).
	default:
	}
	sent := killed.Send() == nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := running("killed"); n != 0 {
		t.Fatalf("%d statements of the settled consumer still run", n)
	}
	settled := intent("killed")
	if want := map[bool]uint64{true: 2, false: 0}[sent]; settled != want {
		t.Fatalf("the consumer's intent when SettleWriter returned: %d, want %d (its insert sent: %v)", settled, want, sent)
	}
	if running("other") != 1 {
		t.Fatal("another consumer's insert was ended")
	}
	if err := other.Send(); err != nil {
		t.Fatalf("the other consumer's insert: %v", err)
	}
	if got := intent("other"); got != 2 {
		t.Errorf("the other consumer's intent: %d, want 2", got)
	}
	// Nothing running: it returns at once.
	if err := store.SettleWriter(ctx, "killed"); err != nil {
		t.Fatal(err)
	}
	if got := intent("killed"); got != settled {
		t.Errorf("the settled consumer's intent moved after the settle: %d, then %d", settled, got)
	}
}
