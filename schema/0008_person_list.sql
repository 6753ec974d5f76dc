-- The persons list without reading the project (issue #12,
-- docs/performance.md "The persons list at scale").

-- The number of live persons of a project, kept by the ingester: one row
-- per project and batch that changed it (or first learnt it), written
-- after the batch's persons and before its commit marker. live is the
-- count as of the stream sequence version, a function of the log alone,
-- so any row, even one of a batch that crashed before its marker, is
-- right as of its version; readers take the newest (argMax). newest is
-- the largest created_at of the project's persons (an upper bound: it
-- anchors the list's first window, never its result).
CREATE TABLE IF NOT EXISTS person_counts (
    project_id UInt64,
    live       UInt64,
    newest     DateTime('UTC'),
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY project_id
;
-- The list's order, newest first, as a sort key: rank = bitNot(created_at), i.e. 2^32-1 - created_at
-- (seconds), rid = 2^64-1 - id, so ascending key order is created_at DESC,
-- id DESC (18.16 has neither DESC keys nor read-in-order). One live row
-- per live person at its current key; a merge that moves a person's
-- created_at earlier tombstones the old key (fold.Batch.Rekeyed), deletes
-- tombstone theirs. Written before the persons rows, so a crash can leave
-- rows ahead of persons, never behind (the list reads persons by key after).
CREATE TABLE IF NOT EXISTS person_order (
    project_id UInt64,
    rank       UInt32,
    rid        UInt64,
    is_deleted UInt8,
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, rank, rid)
SETTINGS index_granularity = 1024
;
-- Upgrade: the newest row of every person folded before this migration
-- (argMax, not FINAL: no filter runs on old versions). Idempotent.
INSERT INTO person_order (project_id, rank, rid, is_deleted, version)
SELECT project_id, bitNot(toUInt32(c)), bitNot(id), d, v FROM (
    SELECT project_id, id, argMax(created_at, version) AS c, argMax(is_deleted, version) AS d, max(version) AS v
    FROM persons GROUP BY project_id, id
)
;
-- The persons that have or had an email (the text value of property
-- 'email', as the list's filters read it): the candidates of email= and
-- of search='s email part, which the list then checks against the
-- persons' newest rows (so a changed email's old row does no harm: the
-- table is a superset, written before the persons rows).
CREATE TABLE IF NOT EXISTS person_emails (
    project_id UInt64,
    email      String,
    id         UInt64,
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, email, id)
SETTINGS index_granularity = 1024
;
-- Upgrade: every version's email. Idempotent.
INSERT INTO person_emails (project_id, email, id, version)
SELECT project_id, property_values[indexOf(property_keys, 'email')], id, version
FROM persons WHERE has(property_keys, 'email')
