// The dynamic segments of URLs, as the configured routes name them
// (/users/:id), replaced by the route's placeholder in the URL
// properties, so that no id leaves in an analytics URL.
const URL_PROPERTIES = ['$current_url', '$referrer', '$pathname', '$initial_current_url', '$initial_referrer']

function compile(routes) {
  return routes.split(',').map((r) => r.trim()).filter(Boolean).map((route) => {
    const parts = route.split('/')
    return { parts, length: parts.length }
  })
}

function censorPath(path, routes) {
  const segs = path.split('/')
  for (const r of routes) {
    if (r.length !== segs.length) continue
    if (r.parts.every((p, i) => p.startsWith(':') || p === segs[i])) {
      return r.parts.map((p, i) => (p.startsWith(':') ? p : segs[i])).join('/')
    }
  }
  return path
}

exports.setupPlugin = ({ config, global }) => {
  global.routes = compile(config.routes || '')
}

exports.processEvent = (event, { global }) => {
  for (const key of URL_PROPERTIES) {
    const v = event.properties?.[key]
    if (typeof v !== 'string') continue
    if (v.startsWith('/')) {
      event.properties[key] = censorPath(v, global.routes)
      continue
    }
    try {
      const u = new URL(v)
      u.pathname = censorPath(u.pathname, global.routes)
      event.properties[key] = u.toString()
    } catch (e) {
      // not a URL: left as it is
    }
  }
  return event
}
