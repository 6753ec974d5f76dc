-- The live persons of a project per window of the list's order (issue #12,
-- G5e): a deep page adds these up to find the window holding its offset and
-- reads that window alone through FINAL (pkg/chstore/listslots.go).
-- slot = intDiv(rank, 16384) of person_order's rank (rank = bitNot of
-- created_at in seconds), so a slot is 16384 s (4.55 h) of created_at and
-- ascending slots are newest first. Kept by the ingester like person_counts:
-- one row per slot and batch that changed it, live being the slot's count as
-- of stream sequence version; readers take the newest (argMax). No backfill:
-- the ingester counts a project's slots from persons on its first batch of
-- the project, and the list takes its other path for a project without rows.
CREATE TABLE IF NOT EXISTS person_windows (
    project_id UInt64,
    slot       UInt32,
    live       UInt64,
    version    UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (project_id, slot)
SETTINGS index_granularity = 1024
