// Nested properties copied to flat keys joined by the separator; the
// nested originals stay.
function flatten(obj, prefix, sep, out) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? prefix + sep + k : k
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      flatten(v, key, sep, out)
    } else if (prefix) {
      out[key] = v
    }
  }
  return out
}

exports.processEvent = function (event, { config }) {
  const sep = config.separator || '__'
  const flat = flatten(event.properties || {}, '', sep, {})
  Object.assign(event.properties, flat)
  if (event.properties.$set) Object.assign(event.properties.$set, flatten(event.properties.$set, '', sep, {}))
  return event
}
