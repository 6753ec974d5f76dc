// Browser and OS details from $useragent, as PostHog's User Agent
// Populator documents them ($browser, $browser_version, $os,
// $browser_type), with the same parser it uses (detect-browser, bundled
// into the one file uploaded). Existing details stay unless
// overrideUserAgentDetails is "true".
import { detect } from 'detect-browser'

export function setupPlugin({ config, global }: any) {
  global.override = config.overrideUserAgentDetails === 'true'
}

export function processEvent(event: any, { global }: any) {
  const ua = event.properties?.$useragent ?? event.properties?.['$user-agent']
  if (typeof ua !== 'string' || ua === '') return event
  if (event.properties.$browser && !global.override) return event
  const info = detect(ua)
  if (!info) return event
  event.properties.$browser = info.name
  event.properties.$browser_version = info.version
  event.properties.$os = info.os
  event.properties.$browser_type = info.type
  return event
}
