// Package controlplane stores the control-plane records of the service —
// organizations, projects and personal API keys — in NATS JetStream
// key-value buckets.
//
// # Why JetStream KV
//
// Every API instance must authenticate requests without a network round trip,
// yet a revoked personal API key has to stop working everywhere almost
// immediately. A KV bucket gives both: the records are durable (file storage,
// a few revisions of history), and each [Store] runs a KV watcher per bucket
// that streams every put and delete into an in-memory index. A revocation
// written by one instance therefore reaches all other instances as soon as
// the watch update arrives (milliseconds), and [Store.Authenticate] and
// [Store.ProjectByToken] answer from memory only.
//
// Writes made through a Store are applied to its own index immediately, so a
// process always reads its own writes; updates from other processes are
// applied by revision, so a late or replayed watch delivery never overwrites
// a newer record.
//
// # Buckets
//
//   - cp_organizations: key = organization UUID, value = JSON [Organization].
//   - cp_projects: key = decimal project id, value = JSON [Project]. Ids are
//     allocated by writing key N with an expected last revision of 0, which
//     the server accepts only if the key has never been written; on conflict
//     the next id is tried. The record itself is the claim, so there is no
//     separate counter to drift.
//   - cp_api_keys: key = key id (UUID), value = JSON [Key]. Only the SHA-256
//     hash of the secret is stored.
//
// Records are never deleted by this package (keys are revoked, not removed),
// which keeps project ids from ever being reused.
package controlplane
