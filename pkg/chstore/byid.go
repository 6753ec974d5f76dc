package chstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
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
	list, err := s.queryPersons(statement.Read(ctx), "SELECT "+personColumns+" FROM persons FINAL PREWHERE project_id = ? AND id IN ? WHERE is_deleted = 0",
		projectID, statement.Set(ids))
	if err != nil {
		return nil, fmt.Errorf("persons by id: %w", err)
	}
	if err := s.withLastSeen(ctx, projectID, Watermark{}, list); err != nil {
		return nil, err
	}
	for _, p := range list {
		out[p.ID] = p
	}
	return out, nil
}

// PersonsByUUID returns the live persons among uuids, by uuid (unknown or
// deleted ones are absent). The fold gives every person a uuid of its own,
// but tables folded before that rule can hold two live persons with one
// (a split or a reset id's fresh person took the uuid5 of its id, which
// may be the one its former owner was created from): the newest id wins,
// as in GetPersonByUUID.
func (s *Store) PersonsByUUID(ctx context.Context, projectID uint64, uuids []uuid.UUID) (map[uuid.UUID]PersonRecord, error) {
	out := make(map[uuid.UUID]PersonRecord, len(uuids))
	if len(uuids) == 0 {
		return out, nil
	}
	list, err := s.queryPersons(statement.Read(ctx), "SELECT "+personColumns+" FROM persons FINAL PREWHERE project_id = ? AND uuid IN ? WHERE is_deleted = 0",
		projectID, statement.Set(uuids))
	if err != nil {
		return nil, fmt.Errorf("persons by uuid: %w", err)
	}
	if err := s.withLastSeen(ctx, projectID, Watermark{}, list); err != nil {
		return nil, err
	}
	for _, p := range list {
		if old, ok := out[p.UUID]; !ok || p.ID > old.ID {
			out[p.UUID] = p
		}
	}
	return out, nil
}

// PersonsByDistinctID returns the live person owning each of distinctIDs
// (ids owned by nobody are absent).
func (s *Store) PersonsByDistinctID(ctx context.Context, projectID uint64, distinctIDs []string) (map[string]PersonRecord, error) {
	out := make(map[string]PersonRecord, len(distinctIDs))
	if len(distinctIDs) == 0 {
		return out, nil
	}
	ctx = statement.Read(ctx)
	owner, ids, err := s.distinctIDs.LiveOwners(ctx, projectID, distinctIDs)
	if err != nil {
		return nil, err
	}
	persons, err := s.PersonsByID(ctx, projectID, ids)
	if err != nil {
		return nil, err
	}
	for d, id := range owner {
		if p, ok := persons[id]; ok {
			out[d] = p
		}
	}
	return out, nil
}
