-- Person read model. Every table is a projection of the JetStream log:
-- replaying the stream into empty tables rebuilds it row for row.
-- Statements are separated by lines holding only ';' and must run on
-- ClickHouse 18.16 and 24.x alike.

-- One row per version of a person; readers take the newest version
-- (FINAL, or argMax(..., version)) and skip is_deleted = 1.
CREATE TABLE IF NOT EXISTS persons (
    project_id      UInt64,
    id              UInt64,          -- integer id: stream sequence of the creating event
    uuid            UUID,            -- uuid5(namespace, 'project:distinct_id') of the first id
    properties      String,          -- JSON object
    property_keys   Array(String),   -- top-level keys of properties ...
    property_values Array(String),   -- ... and their values as text (strings unquoted)
    distinct_ids    Array(String),   -- ids owned, oldest first
    created_at      DateTime('UTC'),
    is_identified   UInt8,
    is_deleted      UInt8,           -- 1: tombstone (merged away or deleted)
    version         UInt64           -- stream sequence of the last change
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, id)
-- Small granules: the ingester and the API read persons by scattered ids,
-- and each id costs a granule read.
SETTINGS index_granularity = 1024
;
-- Which person owns a distinct id. prev_* hold the owner before the batch
-- that wrote the row; the ingester uses them to recover from a crash.
CREATE TABLE IF NOT EXISTS person_distinct_ids (
    project_id      UInt64,
    distinct_id     String,
    person_id       UInt64,
    is_deleted      UInt8,
    version         UInt64,
    prev_person_id  UInt64,
    prev_is_deleted UInt8,
    prev_version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, distinct_id)
SETTINGS index_granularity = 1024
;
-- Every event with the person it was attributed to when it was folded.
-- A message delivered twice has the same sort key, so duplicates collapse.
CREATE TABLE IF NOT EXISTS events (
    project_id   UInt64,
    uuid         UUID,
    event        String,
    distinct_id  String,
    person_id    UInt64,
    person_uuid  UUID,
    timestamp    DateTime('UTC'),
    timestamp_ms UInt16,             -- milliseconds part of timestamp
    properties   String,             -- JSON object, with $set/$set_once/$unset merged in
    seq          UInt64              -- stream sequence
) ENGINE = ReplacingMergeTree(seq)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (project_id, toDate(timestamp), event, uuid)
;
CREATE TABLE IF NOT EXISTS ingestion_warnings (
    project_id UInt64,
    seq        UInt64,
    type       String,
    details    String,               -- JSON object
    timestamp  DateTime('UTC')
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (project_id, seq, type)
;
-- The ingester's commit log: one row per batch, written after all of the
-- batch's rows. Operators read ingest progress here.
CREATE TABLE IF NOT EXISTS ingest_batches (
    consumer     String,
    first_seq    UInt64,
    last_seq     UInt64,
    events       UInt32,
    persons      UInt32,
    distinct_ids UInt32,
    flushed_at   DateTime('UTC')
) ENGINE = MergeTree
ORDER BY (consumer, last_seq)
