package chstore

import "errors"

// ErrUnavailable is wrapped by every error that means ClickHouse cannot
// answer right now (unreachable, restarting, out of connections, over its
// concurrent query limit), as opposed to a bad statement or missing data.
// The API answers it with 503 and Retry-After instead of 500.
var ErrUnavailable = errors.New("clickhouse is unavailable")
