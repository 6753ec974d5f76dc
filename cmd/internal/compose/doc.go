// Package compose holds the tests of the deployment docker-compose.yml
// ships: its services run as the binaries' current flags expect, and each
// component works as the NATS user deploy/nats/nats.conf gives it. It has
// no code of its own: it builds the binaries under cmd/, and the processes
// with pkg/process as the binaries do.
package compose
