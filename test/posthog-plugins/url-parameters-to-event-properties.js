// Query parameters of $current_url to event properties (and $set /
// $set_once when asked).
function keys(config) {
  return (config.parameters || '').split(',').map((s) => s.trim()).filter(Boolean)
}

exports.processEvent = (event, { config }) => {
  const href = event.properties?.$current_url
  if (typeof href !== 'string') return event
  let params
  try {
    params = new URL(href).searchParams
  } catch (e) {
    return event
  }
  const ignoreCase = config.ignoreCase === 'true'
  for (const name of keys(config)) {
    let values = params.getAll(name)
    if (ignoreCase) {
      values = []
      params.forEach((v, k) => { if (k.toLowerCase() === name.toLowerCase()) values.push(v) })
    }
    if (values.length === 0) continue
    const value = values.length > 1 || config.alwaysJson === 'true' ? JSON.stringify(values) : values[0]
    const key = (config.prefix || '') + name + (config.suffix || '')
    event.properties[key] = value
    if (config.setAsUserProperties === 'true') {
      event.properties.$set = { ...(event.properties.$set || {}), [key]: value }
    }
    if (config.setAsInitialUserProperties === 'true') {
      event.properties.$set_once = { ...(event.properties.$set_once || {}), ['initial_' + key]: value }
    }
  }
  return event
}
