// Where the event's address is, from meta.geoip: the address from
// properties.$ip (or event.ip), 127.0.0.1 replaced by an Australian one
// for local development, nothing done when properties.$geoip_disable is
// set. locate is called without await; the City model's fields become
// $geoip_ properties, and go on the person through properties.$set (every
// field null first) and properties.$set_once ($initial_geoip_).
const fields = ['city_name', 'city_confidence', 'subdivision_2_name', 'subdivision_2_code', 'subdivision_1_name',
  'subdivision_1_code', 'country_name', 'country_code', 'continent_name', 'continent_code', 'postal_code',
  'latitude', 'longitude', 'accuracy_radius', 'time_zone']

const nulls = (prefix: string) => Object.fromEntries(fields.map((f) => [prefix + f, null]))

export function processEvent(event: any, { geoip }: any) {
  let ip = event.properties?.$ip || event.ip
  if (!ip || event.properties?.$geoip_disable) return event
  ip = String(ip)
  if (ip === '127.0.0.1') ip = '13.106.122.3'
  const found = geoip.locate(ip)
  if (!found) return event
  const at: Record<string, any> = {}
  const withConfidence = (name: string, record: any) => {
    if (typeof record?.confidence === 'number') at[name + '_confidence'] = record.confidence
  }
  if (found.city) {
    at.city_name = found.city.names?.en
    withConfidence('city', found.city)
  }
  if (found.country) {
    at.country_name = found.country.names?.en
    at.country_code = found.country.isoCode
    withConfidence('country', found.country)
  }
  if (found.continent) {
    at.continent_name = found.continent.names?.en
    at.continent_code = found.continent.code
  }
  if (found.postal) {
    at.postal_code = found.postal.code
    withConfidence('postal_code', found.postal)
  }
  if (found.location) {
    at.latitude = found.location.latitude
    at.longitude = found.location.longitude
    at.accuracy_radius = found.location.accuracyRadius
    at.time_zone = found.location.timeZone
  }
  for (const [i, sub] of (found.subdivisions ?? []).entries()) {
    at[`subdivision_${i + 1}_code`] = sub.isoCode
    at[`subdivision_${i + 1}_name`] = sub.names?.en
    withConfidence(`subdivision_${i + 1}`, sub)
  }
  event.properties ??= {}
  event.properties.$set = { ...nulls('$geoip_'), ...(event.properties.$set ?? {}) }
  event.properties.$set_once = { ...nulls('$initial_geoip_'), ...(event.properties.$set_once ?? {}) }
  for (const [k, v] of Object.entries(at)) {
    event.properties['$geoip_' + k] = v
    event.properties.$set['$geoip_' + k] = v
    event.properties.$set_once['$initial_geoip_' + k] = v
  }
  return event
}
