package deletion

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/testenv"
)

// BenchmarkCountBatch times a run's count of 10,000 persons over 1.86M
// events (the bench's purge sizes): the statement a batch runs before and after its
// mutation.
//
//	go test -run '^$' -bench CountBatch -benchtime 10x ./pkg/deletion/
func BenchmarkCountBatch(b *testing.B) {
	st := testenv.ClickHouse(b)
	conn := st.Conn()
	ctx := context.Background()
	const persons, events = 200000, 1860000
	for start := 0; start < events; start += 200000 {
		batch, err := conn.PrepareBatch(ctx, `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`)
		if err != nil {
			b.Fatal(err)
		}
		for i := start; i < min(start+200000, events); i++ {
			person := uint64(i*7919%persons + 1)
			ts := time.Date(2026, time.Month(1+i%3), 1+i%27, i%24, 0, 0, 0, time.UTC)
			if err := batch.Append(uint64(1), uuid.New(), "$pageview", fmt.Sprintf("d%d", person), person, uuid.Nil, ts, uint16(0), "{}", uint64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			b.Fatal(err)
		}
	}
	r := &Runner{conn: conn}
	var reqs []Request
	for p := 1; p <= 10000; p++ {
		reqs = append(reqs, Request{ProjectID: 1, PersonID: uint64(p * 17), RequestSeq: events})
	}
	ctx, cancel := step(ctx)
	defer cancel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := r.countBatch(ctx, reqs, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.events) != len(reqs) || len(c.copies) != len(reqs) || len(c.hourly) != len(reqs) {
			b.Fatalf("counted %d / %d / %d persons of %d", len(c.events), len(c.copies), len(c.hourly), len(reqs))
		}
	}
}
