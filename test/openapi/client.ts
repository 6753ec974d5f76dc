// A client generated from docs/openapi.json (openapi-typescript's types,
// openapi-fetch's calls) lists, retrieves, changes and deletes a person of
// a running API. TestOpenAPIClient (pkg/httpapi) generates gen/schema.d.ts,
// type-checks this file with tsc, bundles it with esbuild and runs it.
import createClient from "openapi-fetch";
import type { paths } from "./gen/schema.js";

// Node's globals, declared here so the check needs no @types/node.
declare const process: { env: Record<string, string | undefined> };

const equal = (got: unknown, want: unknown, what: string): void => {
  if (JSON.stringify(got) !== JSON.stringify(want)) {
    throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
};

// The persons routes may answer CSV (format=csv), so their typed data is
// JSON or text; these calls ask for JSON.
function json<T>(data: T | string | undefined, what: string): T {
  if (data === undefined || typeof data === "string") {
    throw new Error(`${what}: no JSON body`);
  }
  return data;
}

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const project = Number(env("PERSONHUB_PROJECT_ID"));
const distinctId = env("PERSONHUB_DISTINCT_ID");
const client = createClient<paths>({
  baseUrl: env("PERSONHUB_API_URL"),
  headers: { Authorization: `Bearer ${env("PERSONHUB_PERSONAL_KEY")}` },
});

// List, filtered by the distinct id: the envelope and one person.
const list = await client.GET("/api/projects/{project_id}/persons/", {
  params: { path: { project_id: project }, query: { distinct_id: distinctId, limit: 10 } },
});
equal(list.response.status, 200, "list status");
const page = json(list.data, "list");
equal(page.count, 1, "count");
equal(page.next, null, "next");
const listed = page.results[0];
equal(listed.distinct_ids, [distinctId], "distinct_ids");
equal(listed.properties.plan, "pro", "plan");
const id = String(listed.id);
const item = { params: { path: { project_id: project, id } } };

// Retrieve: the same person.
const got = await client.GET("/api/projects/{project_id}/persons/{id}/", item);
equal(got.response.status, 200, "retrieve status");
equal(json(got.data, "retrieve").uuid, listed.uuid, "retrieved uuid");

// PATCH: the answer is the person after the change.
const patched = await client.PATCH("/api/projects/{project_id}/persons/{id}/", {
  ...item,
  body: { properties: { plan: "enterprise", seats: 12 } },
});
equal(patched.response.status, 200, "PATCH status");
const after = json(patched.data, "PATCH");
if (!("properties" in after)) throw new Error("PATCH answered no person (pending)");
equal(after.properties.plan, "enterprise", "patched plan");
equal(after.properties.seats, 12, "patched seats");
const again = await client.GET("/api/projects/{project_id}/persons/{id}/", item);
equal(json(again.data, "retrieve after PATCH").properties.plan, "enterprise", "plan read back");

// A bad input: the typed error shape names the field.
const bad = await client.GET("/api/projects/{project_id}/persons/", {
  params: { path: { project_id: project }, query: { limit: 5000 } },
});
equal(bad.response.status, 400, "bad limit status");
equal(bad.error?.type, "validation_error", "error type");
equal(bad.error?.attr, "limit", "error attr");

// DELETE, then the person is gone.
const deleted = await client.DELETE("/api/projects/{project_id}/persons/{id}/", item);
equal(deleted.response.status, 204, "DELETE status");
const gone = await client.GET("/api/projects/{project_id}/persons/{id}/", item);
equal(gone.response.status, 404, "retrieve after DELETE");
equal(gone.error?.code, "not_found", "error code");

console.log("openapi client: ok");
