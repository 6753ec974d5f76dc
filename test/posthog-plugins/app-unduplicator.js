// A uuid made from the event's content, so that the same event sent twice
// is stored once by a store that collapses uuids: here a step may not
// change uuid (docs/plugins.md), so the step fails and the event is kept
// as captured.
const { createHash } = require('crypto')

exports.processEvent = (event, { config }) => {
  const parts = [event.event, event.distinct_id, event.timestamp]
  if (config.dedupMode !== 'Event and Timestamp') parts.push(JSON.stringify(event.properties))
  const h = createHash('sha256').update(parts.join('-')).digest('hex')
  event.uuid = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`
  return event
}
