package chstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Version is a ClickHouse server's release, as version() answers it.
type Version struct {
	Major, Minor, Patch int
}

// MinVersion is the oldest ClickHouse the service runs on. The tests run
// every statement on it and on NewestTested (test/portability);
// docs/operations.md, "Supported ClickHouse".
var MinVersion = Version{18, 16, 0}

// NewestTested is the newest ClickHouse every statement was proven on.
var NewestTested = Version{26, 7, 2}

// ErrOldServer says the server predates MinVersion.
var ErrOldServer = errors.New("ClickHouse is older than this service supports")

// ParseVersion reads version()'s answer ("18.16.1", "24.8.4.13").
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("ClickHouse version %q: not major.minor[.patch...]", s)
	}
	var v Version
	for i, dst := range []*int{&v.Major, &v.Minor, &v.Patch} {
		if i >= len(parts) {
			break
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 {
			return Version{}, fmt.Errorf("ClickHouse version %q: not major.minor[.patch...]", s)
		}
		*dst = n
	}
	return v, nil
}

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// serverVersion asks the server its version and refuses one older than
// MinVersion.
func serverVersion(ctx context.Context, conn driver.Conn) (Version, error) {
	var s string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&s); err != nil {
		return Version{}, err
	}
	v, err := ParseVersion(s)
	if err != nil {
		return Version{}, err
	}
	if !v.AtLeast(MinVersion.Major, MinVersion.Minor) {
		return v, fmt.Errorf("%w: %s, the oldest supported is %d.%d (docs/operations.md, \"Supported ClickHouse\")",
			ErrOldServer, v, MinVersion.Major, MinVersion.Minor)
	}
	return v, nil
}

// ServerVersion is the version of the server the store connected to.
func (s *Store) ServerVersion() Version { return s.version }
