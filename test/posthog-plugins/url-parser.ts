// Every query parameter of $current_url as a url_<name> property (PostHog's
// URL Params Parser), read through the url module's URLSearchParams.
import { URLSearchParams } from 'url'

export function processEvent(event: any) {
  const href = event.properties?.$current_url
  if (!href) return event
  try {
    const params = new URLSearchParams(new URL(href).searchParams)
    for (const [key, value] of params.entries()) {
      event.properties[`url_${key}`] = value
    }
  } catch (e) {
    // not a URL: left as it is
  }
  return event
}
