package deletion

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/eventstore"
)

// Queue reads the queued deletions of a project for the API: which
// persons' events are waiting, being deleted, or verified gone.
type Queue struct{ conn driver.Conn }

// NewQueue returns a Queue on a ClickHouse connection.
func NewQueue(conn driver.Conn) *Queue { return &Queue{conn: conn} }

// QueueFilter selects requests of one project; empty fields do not filter.
type QueueFilter struct {
	ProjectID  uint64
	Statuses   []string // StatusPending, StatusRunning, StatusVerified
	PersonID   uint64
	PersonUUID uuid.UUID
	Limit      int
	Offset     int
}

// Counts are a project's requests by status.
type Counts struct {
	Pending  uint64 `json:"pending"`
	Running  uint64 `json:"running"`
	Verified uint64 `json:"verified"`
}

func (f QueueFilter) where() (string, []any) {
	conds, args := []string{"project_id = ?"}, []any{f.ProjectID}
	if len(f.Statuses) > 0 {
		// A group, not a slice: 18.16 takes no array after IN.
		set := make([]any, len(f.Statuses))
		for i, v := range f.Statuses {
			set[i] = v
		}
		conds, args = append(conds, "status IN ?"), append(args, clickhouse.GroupSet{Value: set})
	}
	if f.PersonID != 0 {
		conds, args = append(conds, "person_id = ?"), append(args, f.PersonID)
	}
	if f.PersonUUID != uuid.Nil {
		conds, args = append(conds, "person_uuid = ?"), append(args, f.PersonUUID)
	}
	return strings.Join(conds, " AND "), args
}

// List returns the filter's page of requests, newest request first, the
// number matching, and the project's counts by status (whatever the
// filter). A person has one row: a later request replaces its earlier one.
func (q *Queue) List(ctx context.Context, f QueueFilter) ([]Request, uint64, Counts, error) {
	ctx = readCtx(ctx)
	var c Counts
	err := q.conn.QueryRow(ctx, "SELECT countIf(status = ?), countIf(status = ?), countIf(status = ?) FROM person_deletion_requests FINAL WHERE project_id = ?",
		StatusPending, StatusRunning, StatusVerified, f.ProjectID).Scan(&c.Pending, &c.Running, &c.Verified)
	if err != nil {
		return nil, 0, c, fmt.Errorf("count deletion requests: %w", err)
	}
	where, args := f.where()
	var total uint64
	if err := q.conn.QueryRow(ctx, "SELECT count() FROM person_deletion_requests FINAL WHERE "+where, args...).Scan(&total); err != nil {
		return nil, 0, c, fmt.Errorf("count deletion requests: %w", err)
	}
	rows, err := q.conn.Query(ctx, "SELECT "+requestColumns+" FROM person_deletion_requests FINAL WHERE "+where+
		" ORDER BY request_seq DESC, person_id DESC LIMIT ? OFFSET ?", append(args, f.Limit, f.Offset)...)
	if err != nil {
		return nil, 0, c, fmt.Errorf("list deletion requests: %w", err)
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		var r Request
		if err := rows.Scan(&r.ProjectID, &r.PersonID, &r.PersonUUID, &r.RequestSeq, &r.Status, &r.RequestedAt,
			&r.StartedAt, &r.VerifiedAt, &r.EventsDeleted, &r.Version); err != nil {
			return nil, 0, c, err
		}
		out = append(out, r)
	}
	return out, total, c, rows.Err()
}

// CountMatching counts the events of a project that a filtered deletion
// with f would delete now (a dry run): the behaviour events f matches,
// with now as the instant its relative dates count back from.
func (q *Queue) CountMatching(ctx context.Context, projectID uint64, f Filter, now time.Time) (uint64, error) {
	cond, err := f.Compile(ctx, now)
	if err != nil {
		return 0, err
	}
	return eventstore.New(q.conn).CountFilteredEvents(ctx, eventstore.FilterScope{ProjectID: projectID, Seq: math.MaxUint64,
		Cond: cond.SQL, Args: cond.Args})
}

// ListFiltered returns the project's filtered deletions, newest first,
// of the given statuses (none: all) and person (0 and uuid.Nil: any),
// at most limit, and how many match.
func (q *Queue) ListFiltered(ctx context.Context, f QueueFilter) ([]FilteredRequest, uint64, error) {
	ctx = readCtx(ctx)
	where, args := f.where()
	var total uint64
	if err := q.conn.QueryRow(ctx, "SELECT count() FROM event_deletion_requests FINAL WHERE "+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count event deletion requests: %w", err)
	}
	rows, err := q.conn.Query(ctx, "SELECT "+filteredColumns+" FROM event_deletion_requests FINAL WHERE "+where+
		" ORDER BY request_seq DESC LIMIT ? OFFSET ?", append(args, f.Limit, f.Offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list event deletion requests: %w", err)
	}
	defer rows.Close()
	var out []FilteredRequest
	for rows.Next() {
		r, err := scanFiltered(rows.Scan)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, total, rows.Err()
}
