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
//
// With a known watermark (a list's), the times read at it are kept with
// its pages (listmark.go), and only the ids not kept are read: a kept page
// takes no statement.
func (s *Store) withLastSeen(ctx context.Context, projectID uint64, mark Watermark, list []PersonRecord) error {
	var ids []string
	for _, p := range list {
		ids = append(ids, p.DistinctIDs...)
	}
	if len(ids) == 0 {
		return nil
	}
	seen, missing := s.marks.lastSeen(projectID, mark, ids)
	if len(missing) > 0 {
		read, err := s.events.LastSeen(ctx, projectID, missing)
		if err != nil {
			return fmt.Errorf("persons' last seen: %w", err)
		}
		s.marks.putLastSeen(projectID, mark, missing, read)
		if seen == nil {
			seen = make(map[string]seenAt, len(read))
		}
		for id, t := range read {
			seen[id] = seenAt{t: t, ok: true}
		}
	}
	for i := range list {
		list[i].LastSeenAt = nil
		for _, d := range list[i].DistinctIDs {
			if v := seen[d]; v.ok && (list[i].LastSeenAt == nil || v.t.After(*list[i].LastSeenAt)) {
				t := v.t
				list[i].LastSeenAt = &t
			}
		}
	}
	return nil
}
