// Package activity records and lists activity log entries (who changed
// what), stored in the ClickHouse table activity_log.
package activity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// Change is one changed field.
type Change struct {
	Type   string // "Person"
	Action string // changed, split, ...
	Field  string // "" is shown as null (a split changes no one field)
	Before any
	After  any
}

// changeJSON is Change as stored and shown: field null when empty.
type changeJSON struct {
	Type   string  `json:"type"`
	Action string  `json:"action"`
	Field  *string `json:"field"`
	Before any     `json:"before"`
	After  any     `json:"after"`
}

// MarshalJSON writes the change with "field": null when it names none.
func (c Change) MarshalJSON() ([]byte, error) {
	out := changeJSON{Type: c.Type, Action: c.Action, Before: c.Before, After: c.After}
	if c.Field != "" {
		out.Field = &c.Field
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads a change; a null or absent field is "".
func (c *Change) UnmarshalJSON(b []byte) error {
	var in changeJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*c = Change{Type: in.Type, Action: in.Action, Before: in.Before, After: in.After}
	if in.Field != nil {
		c.Field = *in.Field
	}
	return nil
}

// Detail is the entry's detail object, in the interface's shape. Changes
// nil is shown as null (a deletion), empty as [].
type Detail struct {
	Changes []Change `json:"changes"`
	Name    *string  `json:"name"`
	Trigger any      `json:"trigger"`
	Type    *string  `json:"type"`
	ShortID *string  `json:"short_id"`
}

// Deleted is the detail of a person's "deleted" entry, in PostHog's shape:
// no changes (null) and the person named by its uuid, since the display
// name (properties, distinct ids) is gone with the person.
func Deleted(personUUID string) Detail {
	return Detail{Name: &personUUID}
}

// Split is the detail of a "split_person" entry, in PostHog's shape: one
// change without a field whose after.distinct_ids lists all the person's
// distinct ids before the split, and the person named by its uuid.
func Split(personUUID string, distinctIDs []string) Detail {
	return Detail{Name: &personUUID, Changes: []Change{{
		Type: "Person", Action: "split", After: map[string]any{"distinct_ids": distinctIDs},
	}}}
}

// Entry is one activity log entry.
type Entry struct {
	ID             uuid.UUID
	OrganizationID string
	ProjectID      uint64
	Scope          string
	ItemID         string
	Activity       string
	Detail         Detail
	UserKeyID      string
	UserLabel      string
	CreatedAt      time.Time
}

// Log reads and writes entries.
type Log struct{ conn driver.Conn }

// New returns a Log on a ClickHouse connection.
func New(conn driver.Conn) *Log { return &Log{conn: conn} }

const columns = "id, organization_id, project_id, scope, item_id, activity, detail, user_key_id, user_label, created_at, created_at_ms"

// Write stores entries. Writing the same entry twice (same id) is harmless.
func (l *Log) Write(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	batch, err := l.conn.PrepareBatch(ctx, "INSERT INTO activity_log ("+columns+")")
	if err != nil {
		return err
	}
	for _, e := range entries {
		detail, err := json.Marshal(e.Detail)
		if err != nil {
			batch.Abort()
			return err
		}
		if err := batch.Append(e.ID, e.OrganizationID, e.ProjectID, e.Scope, e.ItemID, e.Activity, string(detail),
			e.UserKeyID, e.UserLabel, e.CreatedAt.UTC(), uint16(e.CreatedAt.Nanosecond()/1e6)); err != nil {
			batch.Abort()
			return err
		}
	}
	return batch.Send()
}

// Query selects entries: one organization and scope, optionally one
// project and one item.
type Query struct {
	OrganizationID string
	Scope          string
	ProjectID      uint64 // 0: any
	ItemID         string // "": any
	Limit, Page    int    // page counts from 1

	// Scopes, when set, selects entries of any of these scopes instead
	// of Scope.
	Scopes []string
}

// List returns one page of entries, newest first, and the total count.
func (l *Log) List(ctx context.Context, q Query) ([]Entry, uint64, error) {
	where := "organization_id = ? AND scope = ?"
	args := []any{q.OrganizationID, q.Scope}
	if len(q.Scopes) > 0 {
		scopes := make([]any, len(q.Scopes))
		for i, sc := range q.Scopes {
			scopes[i] = sc
		}
		where = "organization_id = ? AND scope IN ?"
		args = []any{q.OrganizationID, clickhouse.GroupSet{Value: scopes}}
	}
	if q.ProjectID != 0 {
		where += " AND project_id = ?"
		args = append(args, q.ProjectID)
	}
	if q.ItemID != "" {
		where += " AND item_id = ?"
		args = append(args, q.ItemID)
	}
	var total uint64
	if err := l.conn.QueryRow(ctx, "SELECT count() FROM activity_log FINAL WHERE "+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count activity: %w", err)
	}
	sql := "SELECT " + columns + " FROM activity_log FINAL WHERE " + where +
		" ORDER BY created_at DESC, created_at_ms DESC, id DESC LIMIT ? OFFSET ?"
	args = append(args, q.Limit, (q.Page-1)*q.Limit)
	rows, err := l.conn.Query(clickhouse.Context(ctx), sql, args...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var detail string
		var ms uint16
		if err := rows.Scan(&e.ID, &e.OrganizationID, &e.ProjectID, &e.Scope, &e.ItemID, &e.Activity, &detail,
			&e.UserKeyID, &e.UserLabel, &e.CreatedAt, &ms); err != nil {
			return nil, 0, err
		}
		if err := json.Unmarshal([]byte(detail), &e.Detail); err != nil {
			return nil, 0, fmt.Errorf("activity %s: %w", e.ID, err)
		}
		e.CreatedAt = e.CreatedAt.Add(time.Duration(ms) * time.Millisecond).UTC()
		out = append(out, e)
	}
	return out, total, rows.Err()
}
