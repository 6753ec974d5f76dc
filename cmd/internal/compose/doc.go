// Package compose holds the tests of the deployment docker-compose.yml
// ships: its services run as the binaries' current flags expect, and each
// component works as the NATS user deploy/nats/nats.conf gives it. It has
// no code of its own; it sits under cmd/ to wire the API as cmd/api does
// (cmd/internal/apiserver).
package compose
