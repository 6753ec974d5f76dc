-- events_by_distinct_id with the events' milliseconds (timestamp_ms, as in
-- events). The deleter's rewrite of a distinct id's last seen time
-- (pkg/deletion) needs the newest kept event's milliseconds: without them
-- in the copy it read them from events, a scan of nearly every date of the
-- project for the ids of a large batch (docs/performance.md, S6).
--
-- Rebuilt from events under a new name and swapped in, as migration 0019
-- does, with the same conditions: run with the ingester stopped; each
-- step can run again; on the cluster DDL of docs/operations.md the
-- condition below skips it.
-- only if: SELECT toUInt8(count() = 0) FROM system.tables WHERE database = currentDatabase() AND name = 'events_by_distinct_id' AND engine = 'Distributed'
DROP TABLE IF EXISTS events_by_distinct_id_mv
;
DROP TABLE IF EXISTS events_by_distinct_id_without_ms
;
CREATE TABLE IF NOT EXISTS events_by_distinct_id_ms (
    project_id   UInt64,
    distinct_id  String,
    event        String,
    timestamp    DateTime('UTC'),
    timestamp_ms UInt16,
    uuid         UUID,
    person_id    UInt64,
    seq          UInt64
) ENGINE = ReplacingMergeTree(seq)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, distinct_id, event, toDate(timestamp), uuid)
SETTINGS index_granularity = 1024
;
TRUNCATE TABLE events_by_distinct_id_ms
;
INSERT INTO events_by_distinct_id_ms (project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq)
SELECT project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq
FROM events
WHERE visitParamHas(properties, '$actor') = 0
;
-- An earlier run of this migration may have renamed the table away.
CREATE TABLE IF NOT EXISTS events_by_distinct_id AS events_by_distinct_id_ms
;
RENAME TABLE events_by_distinct_id TO events_by_distinct_id_without_ms
;
RENAME TABLE events_by_distinct_id_ms TO events_by_distinct_id
;
DROP TABLE IF EXISTS events_by_distinct_id_without_ms
;
CREATE MATERIALIZED VIEW IF NOT EXISTS events_by_distinct_id_mv TO events_by_distinct_id
AS SELECT project_id, distinct_id, event, timestamp, timestamp_ms, uuid, person_id, seq
FROM events WHERE visitParamHas(properties, '$actor') = 0
