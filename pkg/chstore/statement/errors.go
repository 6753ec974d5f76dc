package statement

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ErrUnavailable is wrapped by every error that means ClickHouse cannot
// answer right now (unreachable, restarting, out of connections, over its
// concurrent query limit), as opposed to a bad statement or missing data.
// The API answers it with 503 and Retry-After instead of 500.
var ErrUnavailable = errors.New("clickhouse is unavailable")

// ErrGateTimeout: every connection of the pool stayed busy for the whole
// wait (the store's gate). Classify wraps it with ErrUnavailable.
var ErrGateTimeout = errors.New("all clickhouse connections busy")

// overloadCodes are ClickHouse exception codes that say "not now": the
// server is over a limit, shutting down or lost a connection, and the same
// statement may succeed later. Codes are stable across 18.16 and 24.x.
var overloadCodes = map[int32]bool{
	159: true, // TIMEOUT_EXCEEDED
	201: true, // QUOTA_EXCEEDED (QUOTA_EXPIRED on 18.16)
	202: true, // TOO_MANY_SIMULTANEOUS_QUERIES
	203: true, // NO_FREE_CONNECTION
	209: true, // SOCKET_TIMEOUT
	210: true, // NETWORK_ERROR
	236: true, // ABORTED (server shutting down)
	241: true, // MEMORY_LIMIT_EXCEEDED
	252: true, // TOO_MANY_PARTS
	394: true, // QUERY_WAS_CANCELLED (KILL QUERY, shutdown)
}

// Classify wraps err with ErrUnavailable when it means ClickHouse cannot
// answer now: the connection failed (refused, reset, closed, timed out),
// no connection of the pool came free in time, or the server refused the
// statement for a limit or a shutdown. Other errors (a bad statement, a
// cancelled request) are returned as they are. Every read and write of the
// store passes through it (chstore's classifyingConn), so callers only test
// errors.Is(err, ErrUnavailable).
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !unavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func unavailable(err error) bool {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return overloadCodes[ex.Code]
	}
	var netErr net.Error
	switch {
	case errors.Is(err, clickhouse.ErrAcquireConnTimeout), errors.Is(err, ErrGateTimeout),
		errors.Is(err, clickhouse.ErrConnectionClosed):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.Is(err, context.Canceled):
		// The caller gave up (a client went away): not the server's fault.
		return false
	case errors.As(err, &netErr) && netErr.Timeout():
		return true // dial or read timeout
	}
	return false
}
