// Removes the configured properties (a.b.c reaches into objects).
exports.setupPlugin = function ({ config, global }) {
  global.paths = (config.properties || '').split(',').map((s) => s.trim()).filter(Boolean).map((p) => p.split('.'))
}

exports.processEvent = function (event, { global }) {
  for (const path of global.paths) {
    let o = event.properties
    for (let i = 0; o && i < path.length - 1; i++) o = o[path[i]]
    if (o && typeof o === 'object') delete o[path[path.length - 1]]
  }
  return event
}
