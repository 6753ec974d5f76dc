// posthog-node, unchanged but for its host, against a running personhub
// API; what it sends must become one merged, identified person.
//
// Started by the Go test TestCaptureNodeClient (pkg/httpapi), which runs
// NATS, ClickHouse, the ingester and the API and passes them in:
//   PERSONHUB_API_URL        capture and persons API
//   PERSONHUB_PROJECT_ID     the project the persons are read from
//   PERSONHUB_PROJECT_TOKEN  its capture token (phc_...)
//   PERSONHUB_PERSONAL_KEY   a personal API key that may read persons
//   PERSONHUB_RUN            a suffix making this run's distinct ids unique
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PostHog } from 'posthog-node';

function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run this through go test ./pkg/httpapi -run TestCaptureNodeClient`);
  }
  return value;
}

const api = env('PERSONHUB_API_URL');
const projectId = env('PERSONHUB_PROJECT_ID');
const token = env('PERSONHUB_PROJECT_TOKEN');
const personalKey = env('PERSONHUB_PERSONAL_KEY');
const run = env('PERSONHUB_RUN');

async function personOf(distinctId) {
  const res = await fetch(`${api}/api/projects/${projectId}/persons/?distinct_id=${encodeURIComponent(distinctId)}`, {
    headers: { Authorization: `Bearer ${personalKey}` },
  });
  const body = await res.text();
  assert.equal(res.status, 200, `persons API: ${body}`);
  const { results } = JSON.parse(body);
  return results.length === 1 ? results[0] : null;
}

// waitForPerson polls until the person owning distinctId satisfies ok.
async function waitForPerson(distinctId, ok, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let last = null;
  while (Date.now() < deadline) {
    last = await personOf(distinctId);
    if (last && ok(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`the person of ${distinctId} never matched; last seen: ${JSON.stringify(last)}`);
}

test('posthog-node events become one identified person', async () => {
  const errors = [];
  // flushAt above the number of events: shutdown() sends them in one batch.
  const client = new PostHog(token, { host: api, flushAt: 100, flushInterval: 0 });
  client.on('error', (err) => errors.push(err));

  const anon = `node-anon-${run}`;
  const user = `node-${run}@example.com`;
  const laptop = `node-laptop-${run}`;

  // An anonymous visitor with a property of its own.
  client.capture({
    distinctId: anon,
    event: '$pageview',
    properties: { $current_url: 'https://shop.example/pricing', $set_once: { first_page: '/pricing' } },
  });
  // Signs up: identify merges the anonymous id into the user.
  client.identify({ distinctId: user, properties: { $anon_distinct_id: anon, email: user, plan: 'free' } });
  client.capture({ distinctId: user, event: 'upgraded', properties: { $set: { plan: 'pro' } } });
  client.setPersonProperties({ distinctId: user, properties: { seats: 5 }, propertiesOnce: { signup_source: 'node' } });
  // Another id for the same user.
  client.alias({ distinctId: user, alias: laptop });

  // No feature flags here: an empty answer, not an error.
  const flags = await client.getAllFlags(user);
  assert.deepEqual(flags, {});

  await client.shutdown();
  assert.deepEqual(errors, []);

  const person = await waitForPerson(
    user,
    (p) => [anon, user, laptop].every((id) => p.distinct_ids.includes(id)) && p.properties.plan === 'pro' && p.properties.seats === 5,
  );
  assert.equal(person.is_identified, true);
  assert.equal(person.properties.email, user);
  assert.equal(person.properties.first_page, '/pricing');
  assert.equal(person.properties.signup_source, 'node');
  assert.equal(person.distinct_ids.length, 3);
  for (const id of [anon, laptop]) {
    assert.equal((await personOf(id)).id, person.id, `${id} belongs to the same person`);
  }
});
