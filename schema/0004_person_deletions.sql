-- Requests to delete the events of deleted persons. The ingester writes a
-- 'pending' row when it folds a person deletion with delete_events (version
-- = the deletion's stream sequence); the deleter writes 'running' and
-- 'verified' rows with later versions (nanosecond clock). Read with FINAL.
CREATE TABLE IF NOT EXISTS person_deletion_requests (
    project_id   UInt64,
    person_id    UInt64,
    person_uuid  UUID,
    request_seq  UInt64,             -- stream sequence of the deletion: events up to it are deleted
    status       String,             -- pending, running, verified
    requested_at DateTime('UTC'),
    started_at   DateTime('UTC'),    -- 1970-01-01 until a run starts
    verified_at  DateTime('UTC'),    -- 1970-01-01 until verified
    events_deleted UInt64,           -- events found and deleted by the verified run
    version      UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, person_id)
