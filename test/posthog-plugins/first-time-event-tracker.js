// Marks the first time a person does one of the configured events, kept
// in meta.cache: transformations get no cache here (a replay would see
// the state of a later run), so for those events the step fails and the
// event is kept as captured; other events pass untouched.
exports.processEvent = async (event, { config, cache }) => {
  const tracked = (config.events || '').split(',').map((s) => s.trim()).filter(Boolean)
  if (!tracked.includes(event.event)) return event
  const key = `${event.event}_${event.distinct_id}`
  const seen = await cache.get(key, false)
  event.properties.is_first_event_ever = !seen
  if (!seen) await cache.set(key, true)
  return event
}
