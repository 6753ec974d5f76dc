package main

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// valuesRecount is the work values/ adds after a write to one person: the
// store's two statements (pkg/chstore/values_counts.go, keep in step).
func (s *session) valuesRecount(ctx context.Context, raw driver.Conn) (func(ctx context.Context, i int) error, error) {
	const width = 1 << 14
	var newest uint64
	if err := raw.QueryRow(ctx, "SELECT max(version) FROM persons WHERE project_id = ?", s.project).Scan(&newest); err != nil {
		return nil, err
	}
	return func(ctx context.Context, i int) error {
		rows, err := raw.Query(ctx, "SELECT DISTINCT intDiv(id, ?) FROM persons WHERE project_id = ? AND version > ?", uint64(width), s.project, newest-1)
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
