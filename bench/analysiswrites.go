package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/stream"
)

// valuesRecount is the work values/ adds after a write to one person: the
// store's two statements (pkg/chstore/values_counts.go, keep in step):
// the changed buckets from person_buckets (schema 0013), one recounted.
func (s *session) valuesRecount(ctx context.Context, raw driver.Conn) (func(ctx context.Context, i int) error, error) {
	const width = 1 << 14
	var newest uint64
	if err := raw.QueryRow(ctx, "SELECT max(version) FROM person_buckets WHERE project_id = ?", s.project).Scan(&newest); err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) error {
		rows, err := raw.Query(ctx, "SELECT DISTINCT bucket FROM person_buckets WHERE project_id = ? AND version > ?", s.project, newest-1)
		if err != nil {
			return err
		}
		var buckets []uint64
		for rows.Next() {
			var b uint64
			if err := rows.Scan(&b); err != nil {
				return err
			}
			buckets = append(buckets, b)
		}
		rows.Close()
		if len(buckets) != 1 {
			return fmt.Errorf("values recount: %d buckets above the newest version - 1, want 1", len(buckets))
		}
		rows, err = raw.Query(clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0})), `SELECT intDiv(id, ?) AS b, v, count() FROM (
				SELECT id, property_values[indexOf(property_keys, ?)] AS v FROM persons FINAL
				WHERE project_id = ? AND is_deleted = 0 AND has(property_keys, ?) AND ((id >= ? AND id < ?)))
			WHERE v != '' AND v != 'null' GROUP BY b, v LIMIT ?`, uint64(width), "plan", s.project, "plan", buckets[0]*width, (buckets[0]+1)*width, 1<<16+1)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	}, nil
}

// g10WriteRate is the steady write load of the analysis phase's "under writes" rows:
// captured $set events (a new plan for one of 1000 existing persons, the
// API's PATCH as the ingester sees it) per second.
const g10WriteRate = 50

// steadyWrites publishes captured $set events at g10WriteRate until the
// returned stop is called, which reports how many it published.
func (s *session) steadyWrites(ctx context.Context, raw driver.Conn) (stop func() (int, error), err error) {
	rows, err := raw.Query(ctx, "SELECT distinct_id FROM person_distinct_ids WHERE project_id = ? AND is_deleted = 0 LIMIT 1000", s.project)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, d)
	}
	rows.Close()
	if len(ids) == 0 {
		return nil, fmt.Errorf("steady writes: no distinct ids")
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var n int
	var werr error
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second / g10WriteRate)
		defer tick.Stop()
		plans := []string{"free", "pro", "team", "enterprise"}
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id := uuid.NewString()
			body := fmt.Sprintf(`{"uuid":%q,"timestamp":%q,"event":"$set","distinct_id":%q,"$set":{"plan":%q}}`,
				id, time.Now().UTC().Format(time.RFC3339), ids[(i*7919)%len(ids)], plans[i%len(plans)])
			if _, err := stream.Publish(ctx, s.n.js, s.project, id, []byte(body)); err != nil {
				if ctx.Err() == nil {
					werr = err
				}
				return
			}
			n++
		}
	}()
	return func() (int, error) { cancel(); <-done; return n, werr }, nil
}
