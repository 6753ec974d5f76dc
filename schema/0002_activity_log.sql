-- Activity log: who changed what, shown by the activity routes of persons
-- and plugins. Person entries are written by the ingester from the write
-- events in the log (id = the event's uuid, so a replay writes the same
-- rows); plugin entries by the API when the change is stored.
CREATE TABLE IF NOT EXISTS activity_log (
    id              UUID,
    organization_id String,
    project_id      UInt64,           -- 0 for organization-level items (plugins)
    scope           String,           -- 'Person', 'Plugin', 'PluginConfig'
    item_id         String,
    activity        String,           -- 'updated', 'deleted', 'installed', ...
    detail          String,           -- JSON: {changes, name, trigger, type, short_id}
    user_key_id     String,           -- personal API key that made the change ('' for none)
    user_label      String,           -- that key's label
    created_at      DateTime('UTC'),
    created_at_ms   UInt16
) ENGINE = ReplacingMergeTree
ORDER BY (organization_id, scope, project_id, item_id, id)
