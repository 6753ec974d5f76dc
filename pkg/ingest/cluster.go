package ingest

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// On a JetStream cluster (docs/operations.md, "On a NATS cluster") the
// loss of a server leaves its streams, buckets and consumers without a
// leader for the seconds an election takes, and the cluster's meta
// leader (which creates and deletes consumers) too. JetStream API calls
// then time out or answer 503. Once running, the ingester rides through
// that (failed writes, gaps and renewals are retried); at its start, and
// whenever it recreates its consumer, it retries such calls as well
// instead of exiting. Anything else (a partition count that differs from
// the stream's, missing permissions) still stops the start at once.

// unavailable reports whether err is JetStream being unavailable for a
// while rather than refusing the call.
func unavailable(err error) bool {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &api):
		// "JetStream system temporarily unavailable" and the like.
		return api.Code == http.StatusServiceUnavailable || api.Code == http.StatusRequestTimeout
	}
	return false
}

// whileUnavailable calls fn until it succeeds, fails for another reason
// than JetStream being unavailable, or ctx ends.
func (i *Ingester) whileUnavailable(ctx context.Context, what string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !unavailable(err) || ctx.Err() != nil {
			return err
		}
		i.log.Warn("JetStream unavailable (a cluster electing a leader?); retrying", "doing", what, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(backoff(attempt), 2*time.Second)):
		}
	}
}
