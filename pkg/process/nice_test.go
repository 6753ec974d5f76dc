package process_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/personhub/personhub/pkg/process"
)

// threadNices reads the nice value of every thread of this process
// (field 19 of /proc/self/task/*/stat).
func threadNices(t *testing.T) map[string]int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("list threads: %v", err)
	}
	out := map[string]int{}
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		// The command name (field 2) may hold spaces: count from its ")".
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		n, err := strconv.Atoi(f[16])
		if err != nil {
			t.Fatalf("%s: nice field %q", p, f[16])
		}
		out[p] = n
	}
	return out
}

// TestNiceChild runs in the child process of TestSetNiceEveryThread only.
func TestNiceChild(t *testing.T) {
	if os.Getenv("PROCESS_NICE_CHILD") == "" {
		t.Skip("runs as TestSetNiceEveryThread's child")
	}
	// Threads started before SetNice (each locked goroutine holds one).
	var wg sync.WaitGroup
	hold := make(chan struct{})
	start := func(n int) {
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				runtime.LockOSThread()
				wg.Done()
				<-hold
			}()
		}
		wg.Wait()
	}
	start(4)
	if err := process.SetNice(7); err != nil {
		t.Fatal(err)
	}
	start(4) // and after it: they must inherit the value
	for p, n := range threadNices(t) {
		if n != 7 {
			t.Errorf("%s: nice %d, want 7", p, n)
		}
	}
	close(hold)
}

// Every thread of the process runs at the niceness asked for, the ones the
// runtime started before the call and the ones after (on Linux a nice
// value is per thread). In a child process: niceness cannot be raised back.
func TestSetNiceEveryThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread nice values are Linux's")
	}
	for p, n := range threadNices(t) {
		if n != 0 {
			t.Skipf("%s already at nice %d", p, n)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNiceChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "PROCESS_NICE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNiceChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestSetNiceRange(t *testing.T) {
	for _, n := range []int{-1, 20} {
		if err := process.SetNice(n); err == nil {
			t.Errorf("SetNice(%d): no error", n)
		}
	}
	if err := process.SetNice(0); err != nil {
		t.Errorf("SetNice(0): %v", err)
	}
}
