// Converts a revenue property to a base currency with rates fetched from
// an exchange-rate service: the sandbox has no network (no fetch), so the
// step fails and the event is kept as captured.
exports.processEvent = async (event, { config }) => {
  const amount = event.properties?.[config.amountProperty || 'amount']
  const currency = event.properties?.[config.currencyProperty || 'currency']
  if (amount === undefined || !currency) return event
  const res = await fetch(`https://openexchangerates.org/api/latest.json?app_id=${config.openExchangeRatesApiKey}`)
  const { rates } = await res.json()
  event.properties[config.normalizedProperty || 'normalized_amount'] = amount / rates[currency]
  return event
}
