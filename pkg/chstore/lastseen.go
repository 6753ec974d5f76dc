package chstore

import (
	"context"
	"fmt"
)

// withLastSeen sets each person's LastSeenAt: the newest of its distinct
// ids' last seen times (person_last_seen, schema 0020, which the ingester's
// views keep), nil when none of its ids has a behaviour event. One read by
// key for the whole list, whatever its length: a page costs one statement
// more, not one a person. The time follows the ids a person owns now, so a
// merge, a split or a reset shows at once, as the analysis attributes
// events (docs/analysis.md, "Who counts").
func (s *Store) withLastSeen(ctx context.Context, projectID uint64, list []PersonRecord) error {
	var ids []string
	for _, p := range list {
		ids = append(ids, p.DistinctIDs...)
	}
	if len(ids) == 0 {
		return nil
	}
	seen, err := s.events.LastSeen(ctx, projectID, ids)
	if err != nil {
		return fmt.Errorf("persons' last seen: %w", err)
	}
	for i := range list {
		list[i].LastSeenAt = nil
		for _, d := range list[i].DistinctIDs {
			if t, ok := seen[d]; ok && (list[i].LastSeenAt == nil || t.After(*list[i].LastSeenAt)) {
				list[i].LastSeenAt = &t
			}
		}
	}
	return nil
}
