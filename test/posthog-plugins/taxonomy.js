// Event names to one naming convention, through processEventBatch only
// (as PostHog's taxonomy plugin exports). $-events are left as they are.
const words = (name) => name
  .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
  .split(/[\s_\-]+/)
  .filter(Boolean)
  .map((w) => w.toLowerCase())

const conventions = {
  camelCase: (w) => w.map((x, i) => (i ? x[0].toUpperCase() + x.slice(1) : x)).join(''),
  PascalCase: (w) => w.map((x) => x[0].toUpperCase() + x.slice(1)).join(''),
  snake_case: (w) => w.join('_'),
  'kebab-case': (w) => w.join('-'),
  'spaces in between': (w) => w.join(' '),
}

async function processEventBatch(events, { config }) {
  const to = conventions[config.defaultNamingConvention] || conventions.camelCase
  for (const event of events) {
    if (!event.event.startsWith('$')) {
      event.event = to(words(event.event))
    }
  }
  return events
}

module.exports = { processEventBatch }
