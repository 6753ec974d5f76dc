// Keeps a percentage of events: by distinct id (a person's events all
// kept or all dropped) or by event, from a hash, so a replay keeps the
// same ones.
const { createHash } = require('crypto')

exports.setupPlugin = ({ config, global }) => {
  const p = Number(config.percentage)
  if (!(p >= 0 && p <= 100)) throw new Error('percentage must be from 0 to 100')
  global.share = p / 100
}

exports.processEvent = (event, { config, global }) => {
  const key = config.samplingMethod === 'Distinct ID aware sampling' ? event.distinct_id : event.uuid
  const h = parseInt(createHash('sha256').update(key).digest('hex').slice(0, 15), 16) / 16 ** 15
  return h < global.share ? event : null
}
