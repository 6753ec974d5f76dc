-- The newest behaviour event of each distinct id, in Unix milliseconds:
-- a person's last_seen_at is the largest of its current distinct ids'
-- (docs/api.md, "Person"). Keyed by distinct id, not by person, so a
-- merge, a split or a reset needs no rewrite here: an id's events follow
-- the id, as the analysis attributes them (docs/analysis.md, "Who
-- counts"). The API reads the ids of a page of persons by key, max() per
-- id, without FINAL.
--
-- Filled by a materialized view from every INSERT into events (the
-- ingester's, a replay's, an INSERT ... SELECT), so it stays a projection
-- of the log; the view keeps one row per distinct id of each inserted
-- block, and ReplacingMergeTree(seen_ms) keeps the newest row of an id
-- when parts merge. The API's own command events (they carry $actor) are
-- not behaviour and are left out, as in events_by_distinct_id. events
-- keeps the time in two columns (timestamp, seconds; timestamp_ms), as
-- 18.16 has no type of milliseconds. The deleter deletes the rows of the ids whose events it
-- deletes and writes them again from the events it keeps (pkg/deletion);
-- the ingester's recovery adds the rows an interrupted insert left out.
CREATE TABLE IF NOT EXISTS person_last_seen (
    project_id  UInt64,
    distinct_id String,
    seen_ms     UInt64              -- timestamp * 1000 + timestamp_ms
) ENGINE = ReplacingMergeTree(seen_ms)
ORDER BY (project_id, distinct_id)
SETTINGS index_granularity = 1024
;
-- The view, created before the backfill so no insert falls between the
-- two (migrate with the ingester stopped, as every migration).
CREATE MATERIALIZED VIEW IF NOT EXISTS person_last_seen_mv TO person_last_seen
AS SELECT project_id, distinct_id, max(toUInt64(timestamp) * 1000 + timestamp_ms) AS seen_ms
FROM events WHERE visitParamHas(properties, '$actor') = 0
GROUP BY project_id, distinct_id
;
-- Backfill the events stored before this migration: a row per event, not
-- grouped, so that its memory does not grow with the number of distinct
-- ids (the rows of an id collapse as parts merge; readers take max()).
-- A maximum takes the same rows twice, so a run interrupted here runs
-- again as it is.
INSERT INTO person_last_seen (project_id, distinct_id, seen_ms)
SELECT project_id, distinct_id, toUInt64(timestamp) * 1000 + timestamp_ms
FROM events WHERE visitParamHas(properties, '$actor') = 0
