// Posts each event as JSON to config.url.
export async function onEvent(event: any, { config }: any) {
    await fetch(config.url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${config.token || ''}` },
        body: JSON.stringify(event),
    })
}
