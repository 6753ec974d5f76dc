// Package capture turns what the public client libraries send over HTTP
// into event envelopes on JetStream (docs/capture.md, docs/events.md):
// bodies in their encodings (JSON, gzip, form-encoded base64, lz-string),
// the project token in its several places, clock-skew correction, the
// ingester's own validation of every event before anything is published,
// and publishing with a bounded asynchronous window that returns only
// after JetStream acknowledged every event of a request.
package capture

import (
	"fmt"
	"time"

	"github.com/personhub/personhub/pkg/event"
)

// Kind classifies a refused request; the HTTP layer maps each to a status.
type Kind int

const (
	// Malformed: the body or an event cannot be read or would not be
	// folded (400).
	Malformed Kind = iota + 1
	// TooLarge: the request or an event is over its limit (413).
	TooLarge
	// Unauthorized: no project token, or not a known project's (401).
	Unauthorized
	// Unavailable: JetStream did not acknowledge every event (503).
	Unavailable
)

// Error is a refused request. Index is the position of the event at fault
// in the request (0-based), or -1 when the request as a whole is.
type Error struct {
	Kind   Kind
	Index  int
	Reason string
	Err    error // the cause, for logs (Unavailable)
}

func (e *Error) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("event %d: %s", e.Index, e.Reason)
	}
	return e.Reason
}

func (e *Error) Unwrap() error { return e.Err }

func requestError(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Index: -1, Reason: fmt.Sprintf(format, args...)}
}

func eventError(kind Kind, index int, format string, args ...any) *Error {
	return &Error{Kind: kind, Index: index, Reason: fmt.Sprintf(format, args...)}
}

// Limits of a request and of an event.
const (
	// DefaultMaxRequestBytes bounds a request body, before and after
	// decompression.
	DefaultMaxRequestBytes = 20 << 20
	// MaxEventBytes is the largest envelope, the stream's message limit.
	MaxEventBytes = event.MaxSize
	// maxFuture: a corrected timestamp further ahead than this is replaced
	// by the time of arrival, as PostHog does.
	maxFuture = 23 * time.Hour
)

// Config tunes the publisher; the zero value gives the defaults.
type Config struct {
	// MaxRequestBytes bounds a request body, compressed and decompressed
	// (default 20 MiB).
	MaxRequestBytes int64
	// Window is how many events of one request may await their
	// acknowledgement at once (default 1000).
	Window int
	// PublishTimeout bounds the wait for JetStream's acknowledgements of
	// one request (default 10 s); past it the request fails with 503.
	PublishTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Window <= 0 {
		c.Window = 1000
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = 10 * time.Second
	}
	return c
}
