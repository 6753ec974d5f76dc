-- Requests to delete the events a filter matches (docs/api.md, "Deleting
-- events by filter"): of one person (person_id, kept) or of the whole
-- project (person_id 0). The ingester writes a 'pending' row when it folds
-- a $delete_filtered_events command (request_id = the command's uuid,
-- version = its stream sequence); the deleter writes 'running' and
-- 'verified' rows with later versions (nanosecond clock). Read with FINAL.
CREATE TABLE IF NOT EXISTS event_deletion_requests (
    project_id     UInt64,
    request_id     UUID,
    person_id      UInt64,           -- 0: every person's events
    person_uuid    UUID,
    filter         String,           -- JSON: after, before, events, properties
    request_seq    UInt64,           -- stream sequence of the command: events up to it are deleted
    status         String,           -- pending, running, verified
    requested_at   DateTime('UTC'),  -- the command's timestamp (relative dates of the filter count from it)
    started_at     DateTime('UTC'),  -- 1970-01-01 until a run starts
    verified_at    DateTime('UTC'),  -- 1970-01-01 until verified
    events_deleted UInt64,           -- events found and deleted by the verified run
    span_from      DateTime('UTC'),  -- the UTC hours [span_from, span_to) hold every event a run
    span_to        DateTime('UTC'),  -- found to delete (recorded before deleting); 1970-01-01: none yet
    version        UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, request_id)
