-- Which ranges of person ids changed, by version (docs/cohorts.md,
-- "persons/values/"). values/ keeps its counts per bucket of 16384 person
-- ids (pkg/chstore/values_counts.go) and, when the ingester's watermark
-- moved from W, recounts the buckets holding a persons row with version
-- > W. Finding them in persons is a scan of the project's version column
-- (persons is sorted by id: 69 ms at 1M persons); here they are a few
-- rows per bucket. The ingester writes, in the first stage of each batch
-- (ahead of the persons rows, never behind: docs/architecture.md), one row
-- per bucket the batch's persons rows fall in, version = the highest of
-- them. ReplacingMergeTree keeps each bucket's highest version, which is
-- the highest version of the bucket's persons rows, whatever the batching:
-- a replay rebuilds it (testenv.Snapshot checks it against persons).
CREATE TABLE IF NOT EXISTS person_buckets (
    project_id UInt64,
    bucket     UInt64,
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, bucket)
SETTINGS index_granularity = 1024
;
-- The persons stored before this migration. Idempotent (the highest
-- version per bucket stays), so an interrupted migration can run again.
INSERT INTO person_buckets (project_id, bucket, version)
SELECT project_id, intDiv(id, 16384), max(version) FROM persons GROUP BY project_id, intDiv(id, 16384)
