package deletion

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultSchedule runs the deleter on Sundays at 05:00 UTC.
const DefaultSchedule = "0 5 * * 0"

// Config tunes a Runner.
type Config struct {
	// Schedule is a standard five-field cron spec or a descriptor such as
	// @weekly, always evaluated in UTC. Empty disables scheduled runs.
	Schedule string
	// BatchSize is the most persons one mutation deletes (fewer when their
	// ids would make the statement long, see maxListBytes).
	BatchSize int
	// MutationTimeout bounds the wait for one mutation; its requests then
	// fail for this run and the run stops.
	MutationTimeout time.Duration
	// PendingRefresh is how often Schedule refreshes the pending gauge.
	PendingRefresh time.Duration
	// Consumer and Partitions name the ingesters' consumers
	// (stream.ConsumerName): with several partitions a request waits for
	// its project's partition to commit it (partitions.go).
	Consumer   string
	Partitions int
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Schedule:        DefaultSchedule,
		BatchSize:       100000,
		MutationTimeout: time.Hour,
		PendingRefresh:  time.Minute,
		Consumer:        "ingester",
		Partitions:      1,
	}
}

// Validate checks the settings, the schedule included.
func (c Config) Validate() error {
	var errs []error
	if _, err := ParseSchedule(c.Schedule); err != nil {
		errs = append(errs, err)
	}
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch-size %d: want at least 1", c.BatchSize))
	}
	if c.MutationTimeout <= 0 {
		errs = append(errs, fmt.Errorf("mutation-timeout %s: want a positive duration", c.MutationTimeout))
	}
	if c.PendingRefresh <= 0 {
		errs = append(errs, fmt.Errorf("pending refresh interval %s: want a positive duration", c.PendingRefresh))
	}
	return errors.Join(errs...)
}

// parser reads standard specs (minute hour day-of-month month day-of-week)
// and descriptors (@weekly, @daily, @every 6h, ...).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a schedule; an empty (or blank) spec yields nil:
// scheduled runs are disabled. Time zone prefixes are refused, since the
// schedule is always UTC.
func ParseSchedule(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: the schedule is always evaluated in UTC; remove the time zone prefix", spec)
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w (want a cron spec such as %q, or a descriptor such as @weekly)", spec, err, DefaultSchedule)
	}
	return s, nil
}

// NextRun returns the first run of spec after t, in UTC; ok is false when
// spec is empty.
func NextRun(spec string, t time.Time) (next time.Time, ok bool, err error) {
	s, err := ParseSchedule(spec)
	if err != nil || s == nil {
		return time.Time{}, false, err
	}
	return s.Next(t.UTC()), true, nil
}
