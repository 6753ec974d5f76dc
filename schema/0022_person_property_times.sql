-- Timestamp-aware $set (docs/events.md, "Timestamp-aware $set"): the
-- moment recorded for each property by timestamp-aware writes, as a JSON
-- object of key to epoch milliseconds (package proptime), read by the
-- ingester alone. '' for a person that never saw such a write (almost
-- all), which costs nothing; rows written before this column read ''.
ALTER TABLE persons ADD COLUMN property_times String DEFAULT ''
