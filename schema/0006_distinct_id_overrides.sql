-- Persons on events with overrides (docs/architecture.md, "Who an event
-- belongs to"). events.person_id is the owner of the event's distinct id
-- as the event left it; it stays right until that owner changes (a merge
-- moves the id, a split or a reset takes it away, a deletion tombstones
-- it). The ingester writes every person_distinct_ids row written after
-- the id's first assignment (fold.DistinctIDRow.Overridden) here too, in
-- the same stage, so the analysis reads the few changed ids instead of
-- every distinct id and person of a project.

-- The stream sequence of the event that first gave the id an owner; rows
-- written before this migration read 0 (unknown: every later row of the
-- id is an override). 18.16 has no ADD COLUMN IF NOT EXISTS: Migrate
-- treats "column already exists" as done, so the file can run again.
ALTER TABLE person_distinct_ids ADD COLUMN first_seq UInt64
;
-- The current owner of every distinct id whose events may carry another
-- person: read with FINAL; is_deleted = 1 means the id has no owner (its
-- events belong to no one).
CREATE TABLE IF NOT EXISTS person_distinct_id_overrides (
    project_id  UInt64,
    distinct_id String,
    person_id   UInt64,
    is_deleted  UInt8,
    version     UInt64            -- the person_distinct_ids row's version
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, distinct_id)
SETTINGS index_granularity = 1024
;
-- Upgrade: tables folded before this migration have no overrides. Derive
-- them: every tombstoned id, and every id with an event attributed to
-- another person than its current owner. (A replay from the log writes
-- a superset: also ids whose owner changed before any of their events;
-- the attribution is the same.) Newest rows by argMax, not FINAL, so no
-- filter can run on old versions. Idempotent: the same rows again. Both
-- subqueries have an alias: current ClickHouse refuses a joined subquery
-- without one (joined_subquery_requires_alias).
INSERT INTO person_distinct_id_overrides (project_id, distinct_id, person_id, is_deleted, version)
SELECT project_id, distinct_id, owner, deleted, v FROM (
    SELECT project_id, distinct_id, argMax(person_id, version) AS owner,
           argMax(is_deleted, version) AS deleted, max(version) AS v
    FROM person_distinct_ids GROUP BY project_id, distinct_id
) AS owners ANY LEFT JOIN (
    SELECT project_id, distinct_id, groupUniqArray(person_id) AS attributed
    FROM events WHERE person_id != 0 GROUP BY project_id, distinct_id
) AS attributions USING project_id, distinct_id
WHERE deleted = 1 OR length(attributed) > 1 OR (length(attributed) = 1 AND attributed[1] != owner)
