package process

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// IngesterNice is the ingester's default CPU niceness (docs/operations.md,
// "CPU priority"). On a host it shares with ClickHouse and the API, the
// ingester runs flat out whenever a backlog waits; at nice 0 it takes its
// share of the cores from the ClickHouse threads answering a user's GET
// person while ingesting. The value is the measured one
// (docs/performance-history.md, "the ingester's CPU priority").
const IngesterNice = 10

// MaxNice is the largest niceness Linux accepts (the lowest CPU priority).
const MaxNice = 19

// ValidateNice refuses a niceness outside 0..MaxNice: a negative one would
// raise the process above the others and needs privileges.
func ValidateNice(flagName string, n int) error {
	if n < 0 || n > MaxNice {
		return fmt.Errorf("-%s %d out of range 0..%d", flagName, n, MaxNice)
	}
	return nil
}

// SetNice lowers the CPU priority of every thread of this process to
// niceness n (0 leaves it as it is). On Linux a nice value belongs to a
// thread, not to the process, and a new thread takes its creator's: so
// every thread the Go runtime has started so far is changed, and the ones
// it starts later inherit the value. A thread started while the list is
// walked is caught by the next pass.
func SetNice(n int) error {
	if err := ValidateNice("nice", n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	for pass := 0; pass < 5; pass++ {
		tids, err := threadIDs()
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			// getpriority's raw syscall answers 20 - nice.
			cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
			if err == nil && 20-cur == n {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("setpriority thread %d to nice %d: %w", tid, n, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return nil
}

// threadIDs lists the threads of this process.
func threadIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
