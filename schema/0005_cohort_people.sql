-- Members of static cohorts. Unlike the ingester's tables this is not a
-- projection of the event log: the API writes it when a cohort's members
-- are given (docs/cohorts.md, "Static members"), and it is the record of
-- them, like the plugin entries of activity_log. A member is a distinct id
-- (the ids of a person given by id or uuid), so a member merged into
-- another person stays a member through the person that now owns the id.
-- Rows are never updated in place: removal writes is_deleted = 1 with a
-- later version (nanosecond clock). Read with FINAL.
CREATE TABLE IF NOT EXISTS cohort_people (
    project_id  UInt64,
    cohort_id   UInt64,
    distinct_id String,
    person_id   UInt64,           -- the owner when added (for operators)
    is_deleted  UInt8,
    version     UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, cohort_id, distinct_id)
