-- The lowest stream sequence among the events of each (project, UTC hour)
-- (docs/analysis.md, "Counts kept per hour"). An override changes whom an
-- event belongs to only when the event was folded before the override's
-- change, i.e. its seq is at or below the override's version (versions
-- are stream sequences, and a project's events and commands are folded in
-- stream order: docs/architecture.md). So when every override of a
-- project has a version below the lowest seq of a window's events, each
-- event of the window already carries its current person, and trends and
-- retention group events_hourly by its stored person_id with no join to
-- the overrides (the join is a third of trends' time; docs/performance.md,
-- h/g10d).
--
-- A lower bound is all readers need: a seq here that is lower than any
-- event's left (the deleter removed the event) only keeps the join.
-- Filled by a materialized view from every INSERT into events (all of
-- them, the API's command events too: more events only lower the bound),
-- so a replay rebuilds it; readers take minMerge, whatever the parts.
-- The recovery of an insert that died between events and its views adds
-- the rows it finds (chstore.RestoreCopies).
CREATE TABLE IF NOT EXISTS events_first_seq (
    project_id UInt64,
    hour       DateTime('UTC'),   -- toStartOfHour(timestamp), UTC
    min_seq    AggregateFunction(min, UInt64)
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(hour)
ORDER BY (project_id, hour)
;
CREATE MATERIALIZED VIEW IF NOT EXISTS events_first_seq_mv TO events_first_seq
AS SELECT project_id, toStartOfHour(timestamp) AS hour, minState(seq) AS min_seq
FROM events GROUP BY project_id, hour
;
-- Backfill the events stored before this migration. A minimum can take
-- the same rows twice, so a run interrupted here runs again as it is.
INSERT INTO events_first_seq (project_id, hour, min_seq)
SELECT project_id, toStartOfHour(timestamp) AS hour, minState(seq)
FROM events GROUP BY project_id, hour
