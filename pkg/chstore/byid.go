package chstore

import (
	"context"
	"fmt"
)

// PersonsByID returns the live persons among ids (any order; deleted or
// unknown ids are absent), for pages whose ids another query chose
// (the analysis routes). The wide columns are read for those persons'
// granules only (PREWHERE on the key, as ListPersons).
func (s *Store) PersonsByID(ctx context.Context, projectID uint64, ids []uint64) (map[uint64]PersonRecord, error) {
	out := make(map[uint64]PersonRecord, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := s.queryPersons(readCtx(ctx), "SELECT "+personColumns+" FROM persons FINAL PREWHERE project_id = ? AND id IN ? WHERE is_deleted = 0",
		projectID, set(ids))
	if err != nil {
		return nil, fmt.Errorf("persons by id: %w", err)
	}
	for _, p := range list {
		out[p.ID] = p
	}
	return out, nil
}
