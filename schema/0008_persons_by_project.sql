-- Persons partitioned by project. Parts (and so granules) never mix two
-- projects: a project's reads cannot touch another project's rows, however
-- wide their properties (ClickHouse 18.16 cuts granules by rows only, so a
-- granule shared with a huge person was read whole by its neighbour).
--
-- The table is rebuilt and swapped in. Every step can run again after an
-- interruption: the copy of an interrupted run is dropped first, and rows
-- copied twice are identical versions that ReplacingMergeTree collapses.
-- Stop the ingester while this runs (binaries refuse a stale schema).
DROP TABLE IF EXISTS persons_unpartitioned
;
CREATE TABLE IF NOT EXISTS persons_by_project (
    project_id      UInt64,
    id              UInt64,
    uuid            UUID,
    properties      String,
    property_keys   Array(String),
    property_values Array(String),
    distinct_ids    Array(String),
    created_at      DateTime('UTC'),
    is_identified   UInt8,
    is_deleted      UInt8,
    version         UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY project_id
ORDER BY (project_id, id)
SETTINGS index_granularity = 1024
;
INSERT INTO persons_by_project (project_id, id, uuid, properties, property_keys, property_values, distinct_ids, created_at, is_identified, is_deleted, version)
SELECT project_id, id, uuid, properties, property_keys, property_values, distinct_ids, created_at, is_identified, is_deleted, version FROM persons
;
RENAME TABLE persons TO persons_unpartitioned, persons_by_project TO persons
;
DROP TABLE IF EXISTS persons_unpartitioned
