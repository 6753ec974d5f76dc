package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	all := func() []int { return threadsNamed(pid, "") }
	defer func() { setThreadsNice(all(), 0) }()
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
	s.probeSides(ctx, ops, rounds, "ch nice probe",
		[]string{"all at 0", "ingest connections at 10", "ingest connections and merges at 10"},
		func(i int) error {
			setThreadsNice(all(), 0)
			if i == 0 {
				return nil
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
// CPU ticks so far.
func threadCPU(pid int, name string) map[int]uint64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, _ := os.ReadDir(dir)
	out := map[int]uint64{}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(raw)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open {
			continue
		}
		if name != "" && st[open+1:closing] != name {
			continue
		}
		f := strings.Fields(st[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseUint(f[11], 10, 64)
		k, _ := strconv.ParseUint(f[12], 10, 64)
		out[tid] = u + k
	}
	return out
}

func setThreadsNice(tids []int, n int) error {
	for _, tid := range tids {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("setpriority thread %d to %d: %w", tid, n, err)
		}
	}
	return nil
}
