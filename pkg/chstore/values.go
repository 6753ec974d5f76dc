package chstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// PropertyValue is one value of a person property and how many persons
// have it.
type PropertyValue struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// MaxPropertyValues is how many values PropertyValues returns (PostHog's 20).
const MaxPropertyValues = 20

// PropertyValues returns the most frequent values of person property key
// over the project's live persons, each person counted once (its current
// version: FINAL), most frequent first, ties by value byte-wise; with
// contains, only values holding it case-insensitively. Empty values and
// JSON null are not values. A key that is empty or starts with "$virt"
// (PostHog's virtual properties) has none.
func (s *Store) PropertyValues(ctx context.Context, projectID uint64, key, contains string) ([]PropertyValue, error) {
	if key == "" || strings.HasPrefix(key, "$virt") {
		return []PropertyValue{}, nil
	}
	sql := `SELECT v, count() AS c FROM (
			SELECT property_values[indexOf(property_keys, ?)] AS v FROM persons FINAL
			WHERE project_id = ? AND is_deleted = 0 AND has(property_keys, ?))
		WHERE v != '' AND v != 'null'`
	args := []any{key, projectID, key}
	if contains != "" {
		sql += " AND positionCaseInsensitiveUTF8(v, ?) > 0"
		args = append(args, contains)
	}
	sql += " GROUP BY v ORDER BY c DESC, v ASC LIMIT ?"
	args = append(args, MaxPropertyValues)
	rows, err := s.conn.Query(statement.Read(ctx), sql, args...)
	if err != nil {
		return nil, fmt.Errorf("property values: %w", err)
	}
	defer rows.Close()
	out := []PropertyValue{}
	for rows.Next() {
		var v PropertyValue
		if err := rows.Scan(&v.Name, &v.Count); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
