// $current_url normalized: host lowercased, default port dropped, a
// trailing slash of the path removed, fragment removed, parameters
// sorted.
exports.processEvent = (event) => {
  const href = event.properties?.$current_url
  if (typeof href !== 'string') return event
  let u
  try {
    u = new URL(href)
  } catch (e) {
    return event
  }
  u.hash = ''
  u.searchParams.sort()
  if (u.pathname.length > 1 && u.pathname.endsWith('/')) u.pathname = u.pathname.slice(0, -1)
  event.properties.$current_url = u.toString()
  return event
}
