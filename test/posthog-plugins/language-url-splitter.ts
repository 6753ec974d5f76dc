// The language of a path (/en/docs) moved to a property, and stripped
// from the path: pattern finds it (matchGroup its group), replacePattern
// what is replaced in replaceKey by replaceValue.
export function processEvent(event: any, { config }: any) {
  const path = event.properties?.[config.replaceKey || '$pathname']
  if (typeof path !== 'string') return event
  const match = new RegExp(config.pattern).exec(path)
  if (!match) return event
  event.properties[config.property || 'locale'] = match[Number(config.matchGroup || 1)]
  event.properties[config.replaceKey || '$pathname'] = path.replace(new RegExp(config.replacePattern), config.replaceValue ?? '/')
  return event
}
