// Works after the GeoIP plugin in a chain: discards the address once it
// has been located (discardIp), and every GeoIP property, the person's
// included, for events of the listed libraries (discardLibs, values of
// $lib: a backend's events would be located at its data centre).
const located = (key) => key.startsWith('$geoip_') || key.startsWith('$initial_geoip_')

function strip(obj) {
  if (!obj || typeof obj !== 'object') return
  for (const key of Object.keys(obj)) if (located(key)) delete obj[key]
}

exports.processEvent = (event, { config }) => {
  const props = event.properties || {}
  const libs = (config.discardLibs || '').split(',').map((s) => s.trim()).filter(Boolean)
  if (libs.includes(props.$lib)) {
    strip(props)
    strip(props.$set)
    strip(props.$set_once)
  }
  if (config.discardIp === 'true') {
    delete props.$ip
  }
  return event
}
