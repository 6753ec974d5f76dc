-- The ingester's record of person_order repairs (docs/architecture.md,
-- "Crash safety"). A crashed attempt can leave person_order live keys
-- that no refold tombstones (the refold draws other batch boundaries);
-- they all have a version above the commit point of the crash. A start
-- or retry that finds such rows writes a pending row (done = 0, from_seq =
-- the commit point, through_seq = the highest person_order version above
-- it); once the commit point passes through_seq, the ingester tombstones
-- the stale keys above from_seq and writes a done row (through_seq = the
-- commit point it ran at). A pending row with from_seq at or above the
-- newest done row's through_seq is not repaired yet, so a second crash
-- before the repair still repairs from the first crash's commit point.
CREATE TABLE IF NOT EXISTS ingest_repairs (
    consumer    String,
    from_seq    UInt64,
    through_seq UInt64,
    done        UInt8,
    written_at  DateTime('UTC')
) ENGINE = MergeTree
ORDER BY (consumer, from_seq)
