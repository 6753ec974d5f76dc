// Returns null (drop) for events named in config.events.
export function processEvent(event: any, { config }: any) {
    const names = String(config.events || '')
        .split(',')
        .map((s: string) => s.trim())
        .filter(Boolean)
    return names.includes(event.event) ? null : event
}
