// The event's timestamp split into properties: the day of the week by
// name (as Node's Intl writes it for en-GB), and the year, month, day,
// hour and minute in UTC.
exports.processEvent = (event) => {
  if (!event.timestamp) return event
  const d = new Date(event.timestamp)
  if (isNaN(d.getTime())) return event
  event.properties.day_of_the_week = d.toLocaleDateString('en-GB', { weekday: 'long', timeZone: 'UTC' })
  const [date, time] = d.toISOString().split('T')
  const [year, month, day] = date.split('-')
  const [hour, minute] = time.split(':')
  Object.assign(event.properties, { year, month, day, hour, minute })
  return event
}
