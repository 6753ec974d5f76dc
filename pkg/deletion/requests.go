package deletion

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Statuses of a request. A failed attempt goes back to pending; running
// is read like pending, so a run cut short is resumed by the next one.
const (
	StatusPending  = "pending"
	StatusRunning  = "running"
	StatusVerified = "verified"
)

// Request is one row of person_deletion_requests (its newest version).
type Request struct {
	ProjectID     uint64
	PersonID      uint64
	PersonUUID    uuid.UUID
	RequestSeq    uint64 // events of the person up to this sequence are deleted
	Status        string
	RequestedAt   time.Time
	StartedAt     time.Time
	VerifiedAt    time.Time
	EventsDeleted uint64
	Version       uint64
}

const requestColumns = "project_id, person_id, person_uuid, request_seq, status, requested_at, started_at, verified_at, events_deleted, version"

// readCtx keeps filters after FINAL: ClickHouse 18.16 would move a WHERE
// on a non-key column to PREWHERE and test old versions of a row.
func readCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0}))
}

// loadOpen returns the requests whose newest row is not verified, by
// project and person.
func (r *Runner) loadOpen(ctx context.Context) ([]Request, error) {
	rows, err := r.conn.Query(readCtx(ctx), "SELECT "+requestColumns+
		" FROM person_deletion_requests FINAL WHERE status != ? ORDER BY project_id, person_id", StatusVerified)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Request
	for rows.Next() {
		var q Request
		if err := rows.Scan(&q.ProjectID, &q.PersonID, &q.PersonUUID, &q.RequestSeq, &q.Status, &q.RequestedAt,
			&q.StartedAt, &q.VerifiedAt, &q.EventsDeleted, &q.Version); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// countOpen counts the requests not verified yet, filtered ones too, for
// the pending gauge.
func (r *Runner) countOpen(ctx context.Context) (uint64, error) {
	var n, filtered uint64
	err := r.conn.QueryRow(readCtx(ctx), "SELECT count() FROM person_deletion_requests FINAL WHERE status != ?", StatusVerified).Scan(&n)
	if err != nil {
		return 0, err
	}
	err = r.conn.QueryRow(readCtx(ctx), "SELECT count() FROM event_deletion_requests FINAL WHERE status != ?", StatusVerified).Scan(&filtered)
	return n + filtered, err
}

// write inserts new versions of requests. Each must carry a version above
// the one it replaces (see bump).
func (r *Runner) write(ctx context.Context, reqs []Request) error {
	if len(reqs) == 0 {
		return nil
	}
	batch, err := r.conn.PrepareBatch(ctx, "INSERT INTO person_deletion_requests ("+requestColumns+")")
	if err != nil {
		return err
	}
	for _, q := range reqs {
		if err := batch.Append(q.ProjectID, q.PersonID, q.PersonUUID, q.RequestSeq, q.Status, q.RequestedAt.UTC(),
			q.StartedAt.UTC(), q.VerifiedAt.UTC(), q.EventsDeleted, q.Version); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// bump gives q a version above its current one: the nanosecond clock, or
// one more than the current version should the clock lag behind it.
func bump(q *Request) {
	v := uint64(time.Now().UnixNano())
	if v <= q.Version {
		v = q.Version + 1
	}
	q.Version = v
}

// maxListBytes bounds the text of the id and sequence lists spliced into
// one statement (the driver binds them client-side), far below the
// max_query_size of statements with bound values (statement.Bound):
// 100,000 persons of 20-digit ids fit one batch, so a weekly queue of
// that size is one mutation per table, not several that each rewrite
// every part.
const maxListBytes = 6 << 20

// maxASTElements is the max_ast_elements (and max_expanded_ast_elements)
// of the runner's statements. On 18.16 each value of a spliced list is
// an element of the statement's tree, and the default, 50,000, refuses a
// statement over 50,000 persons ("AST is too big"); a list element takes
// at least 3 bytes ("1, "), so this covers maxListBytes of lists and the
// statement around them.
const maxASTElements = maxListBytes / 2

// Statements returns ctx with the settings the runner's statements run
// with: room for a batch's id lists spliced into their text. The bench's
// raw ALTER DELETE, the deleter's baseline, runs with them too.
func Statements(ctx context.Context) context.Context {
	return statement.Bound(ctx, clickhouse.Settings{"max_ast_elements": maxASTElements, "max_expanded_ast_elements": maxASTElements})
}

// listBytes is what one request adds to a statement: its person id twice
// (the IN set and the transform's keys) and its sequence once, each with
// a separator.
func listBytes(q Request) int {
	return 2*(len(strconv.FormatUint(q.PersonID, 10))+2) + len(strconv.FormatUint(q.RequestSeq, 10)) + 2
}

// plan splits requests into batches of one project each, with at most
// maxPersons persons and maxBytes of lists (listBytes) per batch.
func plan(reqs []Request, maxPersons, maxBytes int) [][]Request {
	sorted := append([]Request(nil), reqs...)
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].ProjectID != sorted[j].ProjectID {
			return sorted[i].ProjectID < sorted[j].ProjectID
		}
		return sorted[i].PersonID < sorted[j].PersonID
	})
	var out [][]Request
	var cur []Request
	size := 0
	for _, q := range sorted {
		n := listBytes(q)
		if len(cur) > 0 && (cur[0].ProjectID != q.ProjectID || len(cur) >= maxPersons || size+n > maxBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, q)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
