// Moves properties[config.from] to properties[config.to].
export function processEvent(event: any, { config }: any) {
    const props = event.properties || {}
    if (config.from && config.to && config.from in props) {
        props[config.to] = props[config.from]
        delete props[config.from]
    }
    return { ...event, properties: props }
}
