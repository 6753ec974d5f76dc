-- events_by_distinct_id partitioned by month, as events is (docs/performance.md, G7).
-- Unpartitioned, the deleter's weekly ALTER ... DELETE on it rewrote every
-- part of the table, the project's whole history, since every part holds
-- some row of some deleted person; by month, its condition's time span
-- (pkg/deletion) leaves other months' parts as they are, as it does in
-- events. Readers are unchanged: same name, columns and order; a read by
-- distinct id with a time range reads its months only.
--
-- The table is rebuilt from events, of which it is a projection (the
-- view's filter), under a new name, and swapped in; the view is dropped
-- first and made again last, so that it writes into the new table on
-- every ClickHouse version (a view of a TO table renamed may follow the
-- table on a current server). Run with the ingester stopped, as every
-- migration. Each step can run again: interrupted anywhere, the migration
-- runs again from the top and ends in the same state, since it rebuilds
-- from events rather than from the old table (which may be gone then).
-- On a large table the old table's DROP may meet the server's
-- max_table_size_to_drop (current ClickHouse), and the INSERT its
-- max_partitions_per_insert_block (a block of rows of over 100 months):
-- follow the message, run the migration again. Between the two RENAMEs
-- the table does not exist: the API's reads of it fail for that moment.
--
-- On the cluster DDL of docs/operations.md (a Distributed table of this
-- name) there is nothing to do here: the condition below skips it, and
-- docs/operations.md says how to do the same on a running cluster.
-- only if: SELECT toUInt8(count() = 0) FROM system.tables WHERE database = currentDatabase() AND name = 'events_by_distinct_id' AND engine = 'Distributed'
DROP TABLE IF EXISTS events_by_distinct_id_mv
;
DROP TABLE IF EXISTS events_by_distinct_id_unpartitioned
;
CREATE TABLE IF NOT EXISTS events_by_distinct_id_monthly (
    project_id  UInt64,
    distinct_id String,
    event       String,
    timestamp   DateTime('UTC'),
    uuid        UUID,
    person_id   UInt64,
    seq         UInt64
) ENGINE = ReplacingMergeTree(seq)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, distinct_id, event, toDate(timestamp), uuid)
SETTINGS index_granularity = 1024
;
TRUNCATE TABLE events_by_distinct_id_monthly
;
INSERT INTO events_by_distinct_id_monthly (project_id, distinct_id, event, timestamp, uuid, person_id, seq)
SELECT project_id, distinct_id, event, timestamp, uuid, person_id, seq
FROM events
WHERE visitParamHas(properties, '$actor') = 0
;
-- An earlier run of this migration may have renamed the table away.
CREATE TABLE IF NOT EXISTS events_by_distinct_id AS events_by_distinct_id_monthly
;
RENAME TABLE events_by_distinct_id TO events_by_distinct_id_unpartitioned
;
RENAME TABLE events_by_distinct_id_monthly TO events_by_distinct_id
;
DROP TABLE IF EXISTS events_by_distinct_id_unpartitioned
;
CREATE MATERIALIZED VIEW IF NOT EXISTS events_by_distinct_id_mv TO events_by_distinct_id
AS SELECT project_id, distinct_id, event, timestamp, uuid, person_id, seq
FROM events WHERE visitParamHas(properties, '$actor') = 0
