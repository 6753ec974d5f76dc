// Where a visit came from (PostHog's UTM Referrer, the Snowplow referer
// parser): UTM tags of $current_url first; then a direct visit ($direct,
// or a referrer on one of the config's internal domains); else the
// referring domain looked up in a table of known referrers, with the
// search term read from the referrer's query. The result goes on the event
// and on the person ($set, and $set_once as initial_*). Logs through
// meta.logger, as PostHog's legacy transformations do.
const KNOWN = [
  { medium: 'search', source: 'Google', domains: ['www.google.com', 'www.google.co.uk'], params: ['q'] },
  { medium: 'search', source: 'DuckDuckGo', domains: ['duckduckgo.com'], params: ['q'] },
  { medium: 'social', source: 'Facebook', domains: ['www.facebook.com', 'm.facebook.com'], params: [] },
  { medium: 'email', source: 'Gmail', domains: ['mail.google.com'], params: [] },
]

function param(name, href) {
  const m = new RegExp('[?&]' + name + '(=([^&#]*)|&|#|$)').exec(href)
  if (!m) return null
  return m[2] ? decodeURIComponent(m[2].replace(/\+/g, ' ')) : ''
}

function lower(v) {
  return typeof v === 'string' ? v.toLowerCase() : v
}

function onPerson(event, found, parser, initialExtra) {
  const set = { referrer_parser: parser }
  const once = { initial_referrer_parser: parser, ...initialExtra }
  for (const [k, v] of Object.entries(found)) {
    set[k] = v
    once['initial_' + k] = v
  }
  return { ...event, properties: { ...event.properties, ...found, referrer_parser: parser, $set: set, $set_once: once } }
}

export function processEvent(event, { config, logger }) {
  const props = event.properties
  if (!props) return event
  const str = (v) => (typeof v === 'string' && v !== '' ? v : undefined)
  const url = str(props.$current_url)
  const referrer = str(props.$referrer)
  const domain = str(props.$referring_domain) || ''
  logger.debug(`${event.event}: ${url} from ${referrer}`)

  if (url && url.includes('utm_')) {
    const found = { medium: lower(param('utm_medium', url)), source: lower(param('utm_source', url)), term: lower(param('utm_term', url)) }
    const out = onPerson(event, found, 'utm', {})
    out.properties.$set.campaign = lower(param('utm_campaign', url))
    out.properties.$set_once.initial_campaign = out.properties.$set.campaign
    return out
  }
  const internal = (config.internal_domains || '').split(',').map((d) => d.trim()).filter(Boolean)
  if (referrer && (referrer === '$direct' || internal.some((d) => referrer.includes(d)))) {
    logger.log('direct')
    return onPerson(event, { source: 'direct' }, 'direct_and_own_domains', { initial_medium: 'undefined' })
  }
  let medium = 'unknown', source = 'unknown', term = ''
  for (const k of KNOWN) {
    if (k.domains.includes(domain)) {
      medium = k.medium
      source = k.source.toLowerCase()
      for (const p of k.params) {
        const v = referrer ? param(p, referrer) : null
        if (v !== null) term = v
      }
    }
  }
  return onPerson(event, { medium, source, term }, 'snowplow', {})
}
