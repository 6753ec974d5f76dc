-- events_hourly's view without its GROUP BY (docs/performance.md, h/g1v).
-- The view of migration 0014 grouped each inserted block by (project,
-- event, hour, distinct id, person) before writing it: on 18.16 that
-- hash aggregation over two string keys cost more server CPU than the
-- rows it saved (~0.4 us per ingested event; 0.97 rows per event on the
-- bench's data). Now each counted events row is one row of count 1, and
-- SummingMergeTree adds the rows of a key when parts merge, as it always
-- did across blocks; readers sum(events), so what they read is the same
-- (an unmerged part may hold more rows of a key than before).
--
-- Still filled by a view from every INSERT into events (a replay, an
-- INSERT ... SELECT, the bench's direct inserts), with the same filter.
-- A new name rather than the old one redefined: on a cluster the views
-- sit on each shard over events_local (docs/operations.md), and this
-- migration then runs against the Distributed tables, where both
-- statements must find nothing to do (a view of the old name recreated
-- here would read the Distributed events: schema TestClusterDDL).
-- Run with the ingester stopped, as every migration: an insert between
-- the DROP and the CREATE would not be counted. Interrupted between the
-- two, it runs again as it is.
DROP TABLE IF EXISTS events_hourly_mv
;
CREATE MATERIALIZED VIEW IF NOT EXISTS events_hourly_rows_mv TO events_hourly
AS SELECT project_id, event, toStartOfHour(timestamp) AS hour, distinct_id, person_id, toUInt64(1) AS events
FROM events WHERE visitParamHas(properties, '$actor') = 0
