// Package eventstore owns the events table and the tables ClickHouse fills
// from it (events_by_distinct_id, events_hourly, events_first_seq,
// person_last_seen: schemas 0009, 0014, 0017, 0020): the ingester's insert
// of a batch's events, the recovery's check of what an interrupted insert
// left and its restore of the views' rows, a person's timeline, the
// distinct ids' last seen times, the events attributed to persons that the
// analysis reads (Attributed), the events behavioural cohorts count
// (Performed), and the deleter's counts, purge mutations and rebuild of a
// person's hourly counts and of its ids' last seen times. Every statement
// on these tables lives here.
package eventstore

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// Row is one row of the events table.
type Row struct {
	ProjectID  uint64
	UUID       uuid.UUID
	Event      string
	DistinctID string
	PersonID   uint64
	PersonUUID uuid.UUID
	Timestamp  time.Time
	Properties string
	Seq        uint64
}

// Store reads and writes the events tables through a store's pool
// (chstore.Store.Conn: its errors classified, its statements gated).
type Store struct {
	conn driver.Conn
}

// New returns the events tables as reached through conn.
func New(conn driver.Conn) *Store { return &Store{conn: conn} }

// insertEvents is the ingester's insert into events, its columns in the
// order Write appends them.
const insertEvents = `INSERT INTO events (project_id, uuid, event, distinct_id, person_id, person_uuid, timestamp, timestamp_ms, properties, seq)`

// Write appends the rows column by column: one slice per column
// hands the driver each column at once, where a row-wise Append boxes
// every value in an interface and converts it alone (a tenth of the
// ingester's time in make bench).
func (s *Store) Write(ctx context.Context, events []Row) error {
	if len(events) == 0 {
		return nil
	}
	batch, err := s.conn.PrepareBatch(ctx, insertEvents)
	if err != nil {
		return err
	}
	n := len(events)
	var (
		projects, persons, seqs = make([]uint64, n), make([]uint64, n), make([]uint64, n)
		ids, personUUIDs        = make([]uuid.UUID, n), make([]uuid.UUID, n)
		names, distinct, props  = make([]string, n), make([]string, n), make([]string, n)
		times                   = make([]time.Time, n)
		millis                  = make([]uint16, n)
	)
	size, nameSize, distinctSize := 0, 0, 0
	for i, e := range events {
		projects[i], ids[i], names[i], distinct[i], persons[i], personUUIDs[i] = e.ProjectID, e.UUID, e.Event, e.DistinctID, e.PersonID, e.PersonUUID
		times[i], millis[i], props[i], seqs[i] = e.Timestamp, uint16(e.Timestamp.Nanosecond()/1e6), e.Properties, e.Seq
		size, nameSize, distinctSize = size+len(e.Properties), nameSize+len(e.Event), distinctSize+len(e.DistinctID)
	}
	statement.ReserveStrings(batch, 2, n, nameSize)     // event
	statement.ReserveStrings(batch, 3, n, distinctSize) // distinct_id
	statement.ReserveStrings(batch, 8, n, size)         // properties
	// In the statement's column order.
	for i, col := range []any{projects, ids, names, distinct, persons, personUUIDs, times, millis, props, seqs} {
		if err := batch.Column(i).Append(col); err != nil {
			batch.Abort()
			return statement.Classify(err)
		}
	}
	return batch.Send()
}
