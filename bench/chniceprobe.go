package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// chNiceProbe is G4's A/B for the CPU priority of ClickHouse's own work
// for the ingester, interleaved in one run as niceProbe is. ClickHouse
// 18.16 cannot lower a statement's thread priority; current ClickHouse
// can (the `os_thread_priority` query setting, `os_threads_nice_value_merge_mutate`
// for merges, both with CAP_SYS_NICE). This probe stands in for them from
// outside: it finds the server's connection threads (`TCPHandler`) that
// work while no read runs (the ingester's inserts and lookups) and sets
// them, then also the merge threads (`BackgrProcPool`), to niceness 10,
// against everything at 0. It is a measuring device, not a way to run.
// Off unless -g4-ch-nice-probe is given (needs root to set 0 back).
func (s *session) chNiceProbe(ctx context.Context, ops *readOps, rounds int) {
	pid := s.ch.pid
	if pid <= 0 {
		s.lg.f("ch nice probe: ClickHouse's process is not visible; skipped")
		return
	}
	defer setProcessNice(pid, 0)
	// The ingester's connections: TCPHandler threads busy while nothing
	// reads; looked for again each time, as the ingester's pool may grow.
	ingest := func() []int {
		before := threadCPU(pid, "TCPHandler")
		time.Sleep(400 * time.Millisecond)
		var busy []int
		for tid, t := range threadCPU(pid, "TCPHandler") {
			if t > before[tid] {
				busy = append(busy, tid)
			}
		}
		return busy
	}
	s.probeSides(ctx, ops.inProcess(), rounds, "ch nice probe",
		[]string{"all at 0", "ingest connections at 10", "ingest connections and merges at 10"},
		func(i int) error {
			if err := setProcessNice(pid, 0); err != nil || i == 0 {
				return err
			}
			tids := ingest()
			if i == 2 {
				tids = append(tids, threadsNamed(pid, "BackgrProcPool")...)
			}
			s.lg.f("ch nice probe: side %d: %d threads at 10", i, len(tids))
			return setThreadsNice(tids, 10)
		})
}

// threadsNamed lists the threads of pid whose name is name ("" for all).
func threadsNamed(pid int, name string) []int {
	var out []int
	for tid := range threadCPU(pid, name) {
		out = append(out, tid)
	}
	return out
}

// threadCPU maps the threads of pid named name ("" for all) to their
// CPU time so far.
func threadCPU(pid int, name string) map[int]time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, _ := os.ReadDir(dir)
	out := map[int]time.Duration{}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if comm, cpu, ok := statCPU(raw); ok && (name == "" || comm == name) {
			out[tid] = cpu
		}
	}
	return out
}

// setProcessNice sets every thread of process pid to niceness n (on Linux
// a nice value is per thread).
func setProcessNice(pid, n int) error { return setThreadsNice(threadsNamed(pid, ""), n) }

// setThreadsNice sets each of tids to niceness n; a thread gone meanwhile
// is skipped.
func setThreadsNice(tids []int, n int) error {
	for _, tid := range tids {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("setpriority thread %d to %d: %w", tid, n, err)
		}
	}
	return nil
}
