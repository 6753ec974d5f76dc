// Splits semantic versions of the configured properties into parts.
interface Meta { config: { properties: string } }

const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$/

export function processEvent(event: any, { config }: Meta) {
  for (const key of config.properties.split(',').map((s) => s.trim()).filter(Boolean)) {
    const value = event.properties?.[key]
    const m = typeof value === 'string' ? SEMVER.exec(value) : null
    if (!m) continue
    event.properties[`${key}__major`] = Number(m[1])
    event.properties[`${key}__minor`] = Number(m[2])
    if (m[3] !== undefined) event.properties[`${key}__patch`] = Number(m[3])
    if (m[4] !== undefined) event.properties[`${key}__preRelease`] = m[4]
    if (m[5] !== undefined) event.properties[`${key}__build`] = m[5]
  }
  return event
}
