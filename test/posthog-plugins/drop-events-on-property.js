// Drops events whose property (property_key) has one of property_values
// (comma-separated), or, with no values, any value.
exports.processEvent = (event, { config }) => {
  const value = event.properties?.[config.property_key]
  if (value === undefined) return event
  const values = (config.property_values || '').split(',').map((s) => s.trim()).filter(Boolean)
  return values.length === 0 || values.includes(String(value)) ? null : event
}
