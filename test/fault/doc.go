// Package fault holds the fault tests: the real binaries (built by the
// tests) against a ClickHouse server of the test's own, which is killed
// and restarted, and an embedded NATS server, which is restarted; the
// ingester and the deleter are killed with SIGKILL mid-run. Afterwards
// the state must equal an uninterrupted run of the same events, and during
// an outage the API answers 503 with Retry-After, never 500.
// docs/reliability.md tabulates what they inject and assert.
package fault
