-- The behaviour events of each distinct id (docs/cohorts.md, "One
-- person's cohorts"). events is sorted by (project, day, event), so the
-- events of one person are spread over every granule of a window; this
-- table holds the same rows sorted by distinct id, so persons/cohorts/
-- reads one person's events by key. It is filled by a materialized view
-- from every INSERT into events (the ingester's, a replay's, an INSERT ...
-- SELECT), so it stays a projection of the log: one row per events row.
-- The API's own command events (they carry $actor) are not behaviour and
-- are left out. Rows are deleted with the events they copy: the deleter
-- runs the same ALTER ... DELETE here (pkg/deletion), hence person_id and
-- seq. Sort key: events' (day, event, uuid) with the distinct id in
-- front, so a client-side duplicate (same uuid, day and name) collapses
-- here as it does in events; both are read without FINAL, counting rows.
CREATE TABLE IF NOT EXISTS events_by_distinct_id (
    project_id  UInt64,
    distinct_id String,
    event       String,
    timestamp   DateTime('UTC'),
    uuid        UUID,
    person_id   UInt64,
    seq         UInt64
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (project_id, distinct_id, event, toDate(timestamp), uuid)
SETTINGS index_granularity = 1024
;
-- The view, created before the backfill so no insert falls between the
-- two (an insert running during the migration can be copied twice; the
-- copies share the sort key and collapse on merge; migrate with the
-- ingester stopped, as every migration).
CREATE MATERIALIZED VIEW IF NOT EXISTS events_by_distinct_id_mv TO events_by_distinct_id
AS SELECT project_id, distinct_id, event, timestamp, uuid, person_id, seq
FROM events WHERE visitParamHas(properties, '$actor') = 0
;
-- Backfill the events stored before this migration. Idempotent: an event
-- already copied (same project and seq) is not copied again, so a
-- migration interrupted here can run again.
INSERT INTO events_by_distinct_id (project_id, distinct_id, event, timestamp, uuid, person_id, seq)
SELECT project_id, distinct_id, event, timestamp, uuid, person_id, seq
FROM events
WHERE visitParamHas(properties, '$actor') = 0
  AND (project_id, seq) NOT IN (SELECT project_id, seq FROM events_by_distinct_id)
