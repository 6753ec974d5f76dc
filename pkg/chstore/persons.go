package chstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/distinctids"
	"github.com/personhub/personhub/pkg/chstore/eventstore"
	"github.com/personhub/personhub/pkg/chstore/search"
	"github.com/personhub/personhub/pkg/chstore/statement"
	"github.com/personhub/personhub/pkg/propfilter"
	"github.com/personhub/personhub/pkg/propjson"
)

// ErrNotFound is returned for a person that does not exist or is deleted.
var ErrNotFound = errors.New("not found")

// PersonRecord is a live person as read by the API.
type PersonRecord struct {
	ID           uint64
	UUID         uuid.UUID
	Properties   map[string]any
	DistinctIDs  []string
	CreatedAt    time.Time
	IsIdentified bool
	// LastSeenAt is the time of the person's newest behaviour event, over
	// the distinct ids it owns now (withLastSeen); nil when it has none.
	LastSeenAt *time.Time
}

// ListQuery selects persons of one project. Empty fields do not filter.
type ListQuery struct {
	ProjectID  uint64
	DistinctID string
	Email      string
	Search     string
	Properties propfilter.Clause
	Limit      int // 0: no limit
	Offset     int
	// Mark is the ingester's watermark read before the query: an
	// unfiltered page is kept by it (listmark.go).
	Mark Watermark
}

// searchCandidates names, by id, a superset of the persons that search=
// matches: an email containing the term, case-insensitively (the search
// index's candidates, chosen by the probe p), the term as a distinct id,
// the term as a uuid.
func searchCandidates(projectID uint64, term string, p search.Probe) statement.Subquery {
	cands := p.Candidates(projectID, term).Union(distinctids.Owners(projectID, term))
	if u, err := uuid.Parse(term); err == nil {
		// uuid never changes between versions: any row names the id.
		cands = cands.Union(statement.NewSubquery("SELECT id FROM persons WHERE project_id = ? AND uuid = ?", projectID, u))
	}
	return cands
}

const personColumns = "id, uuid, properties, distinct_ids, created_at, is_identified"

// where builds the filter of a list query; p is search='s gram probe
// (search.Index.Probe).
func (q ListQuery) where(p search.Probe) (string, []any) {
	key, kargs, tests, targs := q.filter(p)
	return key + " AND " + tests, append(kargs, targs...)
}

// filter is where in two parts: key, conditions on the key (project_id,
// and id for the indexed filters), safe in a PREWHERE under FINAL since
// every version of a person has the same key; and tests, the conditions
// on the newest row, which must come after FINAL.
func (q ListQuery) filter(p search.Probe) (key string, kargs []any, tests string, targs []any) {
	keys := []string{"project_id = ?"}
	kargs = []any{q.ProjectID}
	conds := []string{"is_deleted = 0"}
	if q.DistinctID != "" {
		owners, oargs := distinctids.Owners(q.ProjectID, q.DistinctID).In("id")
		keys = append(keys, owners)
		kargs = append(kargs, oargs...)
		conds = append(conds, "has(distinct_ids, ?)")
		targs = append(targs, q.DistinctID)
	}
	// Each indexed filter also names its candidates by id, the key, so
	// FINAL reads their granules only; the test on the newest row stays
	// (person_emails holds old emails too).
	if q.Email != "" {
		owners, oargs := search.EmailOwners(q.ProjectID, q.Email).In("id")
		keys = append(keys, owners)
		kargs = append(kargs, oargs...)
		conds = append(conds, "property_values[indexOf(property_keys, 'email')] = ?")
		targs = append(targs, q.Email)
	}
	if q.Search != "" {
		cands, cargs := searchCandidates(q.ProjectID, q.Search, p).In("id")
		or := []string{
			"positionCaseInsensitiveUTF8(property_values[indexOf(property_keys, 'email')], ?) > 0",
			"has(distinct_ids, ?)",
		}
		targs = append(targs, q.Search, q.Search)
		if u, err := uuid.Parse(q.Search); err == nil {
			or = append(or, "uuid = ?")
			targs = append(targs, u)
		}
		// The candidates name the granules FINAL reads; the tests on the
		// newest row decide.
		keys = append(keys, cands)
		kargs = append(kargs, cargs...)
		conds = append(conds, "("+strings.Join(or, " OR ")+")")
	}
	if q.Properties.SQL != "" {
		conds = append(conds, q.Properties.SQL)
		targs = append(targs, q.Properties.Args...)
	}
	return strings.Join(keys, " AND "), kargs, strings.Join(conds, " AND "), targs
}

// fewMatches bounds the page end (offset + limit) of an indexed filter's
// list answered by one statement (listFew).
const fewMatches = 200

// ListPersons returns one page, newest first (created_at, then id), and
// the number of matching persons.
//
// The page's ids are chosen first, reading only narrow columns; the wide
// ones (properties, distinct ids) are then read for the page's persons
// only, not for every person of the project the sort passes over, and
// their last seen times for the page's distinct ids only.
func (s *Store) ListPersons(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	ctx = statement.KeyRead(ctx)
	list, total, err := s.listPersons(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	return list, total, s.withLastSeen(ctx, q.ProjectID, q.Mark, list)
}

func (s *Store) listPersons(ctx context.Context, q ListQuery) ([]PersonRecord, uint64, error) {
	if q.unfiltered() && q.Limit > 0 {
		list, total, ok, err := s.listUnfiltered(ctx, q, true)
		if ok || err != nil {
			return list, total, err
		}
	}
	if q.propertiesOnly() {
		return s.listByProperties(ctx, q)
	}
	// The other filters name their candidates by key (a distinct id's
	// past owners, person_emails), so their matches are few: one
	// statement reads their full rows when they fit the page's end
	// (listFew); else one reads them all, narrow, and gives both the
	// count and the page's ids.
	probe, err := s.search.Probe(ctx, q.ProjectID, q.Search)
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: %w", err)
	}
	key, kargs, tests, targs := q.filter(probe)
	args := slices.Clip(append(kargs, targs...))
	if end := q.Offset + q.Limit; q.Limit > 0 && end <= fewMatches {
		list, total, ok, err := s.listFew(probe.Ctx(ctx), q, key, tests, args)
		if err != nil || ok {
			return list, total, err
		}
	}
	rows, err := s.conn.Query(probe.Ctx(ctx), "SELECT id, toUInt32(created_at) FROM persons FINAL PREWHERE "+key+" WHERE "+tests, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list persons: %w", err)
	}
	defer rows.Close()
	var matches []propCandidate
	for rows.Next() {
		var c propCandidate
		if err := rows.Scan(&c.id, &c.createdAt); err != nil {
			return nil, 0, fmt.Errorf("list persons: %w", err)
		}
		matches = append(matches, c)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list persons: %w", err)
	}
	list, err := s.materialise(ctx, q.ProjectID, pageIDs(sortedForList(matches), q))
	return list, uint64(len(matches)), err
}

// listFew answers an indexed filter's page in one statement when the
// filter matches at most the page's end (offset + limit) persons: their
// full rows are read at once, up to one more than that, and sorted here.
// A distinct id has one owner and an email is usually one person's, so
// this is the usual case; ok is false when more matched (the caller then
// reads every match narrow, and the page's rows by key).
func (s *Store) listFew(ctx context.Context, q ListQuery, key, tests string, args []any) ([]PersonRecord, uint64, bool, error) {
	end := q.Offset + q.Limit
	found, _, err := s.queryVersioned(ctx, q.ProjectID, "SELECT "+personColumns+", version FROM persons FINAL PREWHERE "+key+" WHERE "+tests+" LIMIT ?", append(args, end+1)...)
	if err != nil {
		return nil, 0, false, fmt.Errorf("list persons: %w", err)
	}
	if len(found) > end {
		return nil, 0, false, nil
	}
	slices.SortFunc(found, func(a, b PersonRecord) int {
		return compareForList(propCandidate{id: a.ID, createdAt: uint32(a.CreatedAt.Unix())},
			propCandidate{id: b.ID, createdAt: uint32(b.CreatedAt.Unix())})
	})
	return found[min(q.Offset, len(found)):], uint64(len(found)), true, nil
}

// exportBlock is the persons an export reads a block of rows at a time
// (exportCtx's max_block_size), and hands on with their last seen times.
const exportBlock = 1024

// exportCtx is statement.Read with small result blocks: the driver holds a whole
// block in memory, and ClickHouse's default (65,536 rows) of persons with
// large properties would be tens of MB, whatever the export does with them.
func exportCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0, "max_block_size": exportBlock}))
}

// EachPerson streams every person matching q (no paging), for exports.
func (s *Store) EachPerson(ctx context.Context, q ListQuery, fn func(PersonRecord) error) error {
	ctx = exportCtx(ctx)
	probe, err := s.search.Probe(ctx, q.ProjectID, q.Search)
	if err != nil {
		return err
	}
	where, args := q.where(probe)
	sql := "SELECT " + personColumns + " FROM persons FINAL WHERE " + where + " ORDER BY created_at DESC, id DESC"
	if q.Limit > 0 {
		sql += " LIMIT ? OFFSET ?"
		args = append(args, q.Limit, q.Offset)
	}
	rows, err := s.conn.Query(probe.Ctx(ctx), sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	// The persons go to fn a block at a time, each block's last seen
	// times read in one statement.
	block := make([]PersonRecord, 0, exportBlock)
	flush := func() error {
		if err := s.withLastSeen(ctx, q.ProjectID, Watermark{}, block); err != nil {
			return err
		}
		for _, p := range block {
			if err := fn(p); err != nil {
				return err
			}
		}
		block = block[:0]
		return nil
	}
	for rows.Next() {
		p, err := scanPerson(rows)
		if err != nil {
			return err
		}
		if block = append(block, p); len(block) == exportBlock {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}

// GetPerson returns a live person by integer id.
func (s *Store) GetPerson(ctx context.Context, projectID, id uint64) (PersonRecord, error) {
	return s.getPerson(ctx, "id = ?", projectID, id)
}

// GetPersonByUUID returns a live person by uuid.
func (s *Store) GetPersonByUUID(ctx context.Context, projectID uint64, id uuid.UUID) (PersonRecord, error) {
	return s.getPerson(ctx, "uuid = ?", projectID, id)
}

func (s *Store) getPerson(ctx context.Context, cond string, projectID uint64, key any) (PersonRecord, error) {
	// The key condition is on the primary key (id) or a column that
	// never changes between versions (uuid), so it filters before FINAL
	// (PREWHERE: the wide columns are read for the person's granules
	// only); is_deleted must be tested after it.
	list, err := s.queryPersons(statement.KeyRead(ctx),
		"SELECT "+personColumns+" FROM persons FINAL PREWHERE project_id = ? AND "+cond+" WHERE is_deleted = 0 ORDER BY id DESC LIMIT 1",
		projectID, key)
	if err != nil {
		return PersonRecord{}, err
	}
	if len(list) == 0 {
		return PersonRecord{}, ErrNotFound
	}
	if err := s.withLastSeen(ctx, projectID, Watermark{}, list[:1]); err != nil {
		return PersonRecord{}, err
	}
	return list[0], nil
}

func (s *Store) queryIDs(ctx context.Context, sql string, args ...any) ([]uint64, error) {
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func scanPerson(rows scanner) (PersonRecord, error) {
	var p PersonRecord
	var props string
	var ident uint8
	if err := rows.Scan(&p.ID, &p.UUID, &props, &p.DistinctIDs, &p.CreatedAt, &ident); err != nil {
		return p, err
	}
	return decodePerson(p, props, ident)
}

// decodePerson completes a person scanned with its properties' text and
// is_identified.
func decodePerson(p PersonRecord, props string, ident uint8) (PersonRecord, error) {
	var err error
	if p.Properties, err = propjson.Decode(props); err != nil {
		return p, fmt.Errorf("person %d: %w", p.ID, err)
	}
	p.IsIdentified = ident == 1
	p.CreatedAt = p.CreatedAt.UTC()
	return p, nil
}

func (s *Store) queryPersons(ctx context.Context, sql string, args ...any) ([]PersonRecord, error) {
	rows, err := s.conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PersonRecord
	for rows.Next() {
		p, err := scanPerson(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PersonEvents returns, in stream order, the events of the given distinct
// ids up to until (eventstore.Store.PersonEvents), for the properties timeline.
func (s *Store) PersonEvents(ctx context.Context, projectID uint64, distinctIDs []string, until time.Time) ([]eventstore.TimelineEvent, error) {
	return s.events.PersonEvents(ctx, projectID, distinctIDs, until)
}

// EachPersonEvent streams the stored events of the given distinct ids in
// stream order (eventstore.Store.EachPersonEvent), for a person's export
// and its properties at a moment.
func (s *Store) EachPersonEvent(ctx context.Context, projectID uint64, distinctIDs []string, updatesOnly bool, until time.Time, fn func(eventstore.PersonEvent) error) error {
	return s.events.EachPersonEvent(ctx, projectID, distinctIDs, updatesOnly, until, fn)
}
