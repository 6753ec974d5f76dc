-- The ingester's intent log: before the rows of a batch are written, a row
-- here says that rows up to through_seq may be written under this
-- consumer without a commit marker yet (docs/architecture.md, "One events
-- row per message"). On start, the ingester reads max(through_seq): rows
-- of the range (last commit, that] may already be in events, so the batches
-- of that range look up which of their seqs are there and leave those out.
-- One row covers many batches (through_seq reaches ahead of the batch), so
-- normal running writes one small row per BatchSize sequences or fewer.
CREATE TABLE IF NOT EXISTS ingest_intents (
    consumer    String,
    first_seq   UInt64,
    through_seq UInt64,
    written_at  DateTime('UTC')
) ENGINE = MergeTree
ORDER BY (consumer, through_seq)
