// Package process builds the service's three kinds of process (the
// ingester, the HTTP API and the deleter) from one struct of dependencies
// each: the one place each is wired, used by its binary under cmd/, by
// cmd/stack (which runs the ingester and the API in one process), by the
// bench's child processes and by tests, so they cannot drift apart.
//
// A builder takes values already parsed and connections already dialled
// (the caller owns and closes them); flags and environment variables are
// read under cmd/ only. What a builder starts, its Close or Run stops, in
// the order the comments give. The package also holds what every process
// kind shares at run time: the ops server (/metrics, /healthz, /readyz),
// the readiness check, CPU niceness and garbage-collector tuning.
package process
