// The configured properties replaced by a salted SHA-256 of their value
// (hex), and the distinct id too when asked.
const crypto = require('node:crypto')

const hash = (salt, v) => crypto.createHash('sha256').update(salt + String(v)).digest('hex')

exports.processEvent = (event, { config }) => {
  for (const key of (config.privateFields || '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (event.properties[key] !== undefined) event.properties[key] = hash(config.salt, event.properties[key])
  }
  if (config.hashDistinctId === 'true') event.distinct_id = hash(config.salt, event.distinct_id)
  return event
}
