package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	rpprof "runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/ingest"
	"github.com/personhub/personhub/pkg/process"
)

// childCommand is the first argument that makes the bench binary run as
// the ingester under test: pkg/ingest exactly as cmd/ingester runs it,
// in its own process (so its CPU time and RSS are its own), plus a
// loopback-only HTTP server with /metrics, /debug/pprof/ and CPU-profile
// start/stop, which exists only in this bench code path.
const childCommand = "ingester-child"

func childMain(args []string) error {
	fs := flag.NewFlagSet(childCommand, flag.ContinueOnError)
	conns := bindConns(fs)
	logPath := fs.String("log", "", "log file")
	cfg := ingest.DefaultConfig()
	fs.StringVar(&cfg.Consumer, "consumer", cfg.Consumer, "ingest Consumer (a second name replays the log into another database)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "ingest BatchSize")
	fs.DurationVar(&cfg.BatchWait, "batch-wait", cfg.BatchWait, "ingest BatchWait")
	fs.IntVar(&cfg.MaxCachedPersons, "max-cached-persons", cfg.MaxCachedPersons, "ingest MaxCachedPersons")
	fs.IntVar(&cfg.DenseMisses, "dense-misses", cfg.DenseMisses, "ingest DenseMisses")
	fs.BoolVar(&cfg.WriteLane, "write-lane", cfg.WriteLane, "ingest WriteLane")
	fs.DurationVar(&cfg.GrowFor, "grow-for", cfg.GrowFor, "ingest GrowFor")
	fs.IntVar(&cfg.GrowPersons, "grow-persons", cfg.GrowPersons, "ingest GrowPersons")
	// As cmd/ingester: its default niceness, or INGESTER_NICE (for A/B runs).
	defaultNice := process.IngesterNice
	if v := strings.TrimSpace(os.Getenv("INGESTER_NICE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("INGESTER_NICE=%q: not an integer", v)
		}
		defaultNice = n
	}
	nice := fs.Int("nice", defaultNice, "CPU niceness (env INGESTER_NICE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := process.SetNice(*nice); err != nil {
		return err
	}
	logOut := io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return err
		}
		defer f.Close()
		logOut = f
	}
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	process.TuneGC(log, process.IngesterMemoryLimitMiB) // as cmd/ingester does by default
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// As cmd/ingester: ClickHouse runs its statements at its niceness
	// where it can (chstore.Config.ThreadNice).
	_, js, store, closeConns, err := conns.open(ctx, "bench-ingester", *nice)
	if err != nil {
		return err
	}
	defer closeConns()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Built as cmd/ingester builds it, with the transformation hook: every
	// phase pays its price for events without a chain, and the
	// transformation phase measures chains.
	ing, err := process.NewIngester(ctx, process.IngesterConfig{Ingest: cfg, JS: js, Store: store, Log: log, Reg: reg})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, opsMux(reg)) }()
	fmt.Printf("READY %s\n", ln.Addr())
	return ing.Run(ctx)
}

// childProc is a running child (the ingester, or the API), seen from
// the bench.
type childProc struct {
	what string // "ingester" or "api"
	cmd  *exec.Cmd
	pid  int
	http string   // its ops server
	also []string // the rest of its READY line
	done chan error

	stopOnce sync.Once
	stopErr  error
}

// startIngester runs the bench binary as the ingester child.
func startIngester(natsURL, chAddr, db, logPath string, cfg ingest.Config) (*childProc, error) {
	return startChild("ingester", childCommand, "-nats-url", natsURL, "-clickhouse-addr", chAddr, "-database", db,
		"-log", logPath, "-consumer", cfg.Consumer, "-batch-size", strconv.Itoa(cfg.BatchSize), "-batch-wait", cfg.BatchWait.String(),
		"-max-cached-persons", strconv.Itoa(cfg.MaxCachedPersons), "-dense-misses", strconv.Itoa(cfg.DenseMisses), "-write-lane="+strconv.FormatBool(cfg.WriteLane),
		"-grow-for", cfg.GrowFor.String(), "-grow-persons", strconv.Itoa(cfg.GrowPersons))
}

// startChild runs the bench binary with args and waits for the child's
// "READY <ops address> [more...]" line.
func startChild(what string, args ...string) (*childProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &childProc{what: what, cmd: cmd, pid: cmd.Process.Pid, done: make(chan error, 1)}
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- strings.Fields(a)
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case a := <-ready:
		p.http, p.also = "http://"+a[0], a[1:]
	case err := <-p.done:
		return nil, fmt.Errorf("%s child exited at start: %v", what, err)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("%s child did not start within 30s", what)
	}
	return p, nil
}

// stop sends SIGTERM (the ingester flushes the batch in hand; the API
// drains its requests) and waits. Stopping a stopped child returns the
// first stop's result at once (its exit was read by that stop).
func (p *childProc) stop() error {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case p.stopErr = <-p.done:
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			p.stopErr = fmt.Errorf("%s child did not stop within 60s; killed", p.what)
		}
	})
	return p.stopErr
}

func (p *childProc) get(path string) (string, error) {
	resp, err := http.Get(p.http + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("%s: %s %s", path, resp.Status, body)
	}
	return string(body), err
}

func (p *childProc) startCPUProfile(path string) error {
	_, err := p.get("/cpu/start?path=" + path)
	return err
}

func (p *childProc) stopCPUProfile() error {
	_, err := p.get("/cpu/stop")
	return err
}

func (p *childProc) heapProfile(path string) error {
	_, err := p.get("/heap?path=" + path)
	return err
}

// metric returns the sum of a metric's samples (every label set) from the
// child's /metrics text.
func (p *childProc) metric(name string) float64 {
	text, err := p.get("/metrics")
	if err != nil {
		return 0
	}
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// childConns are a child's flags for its NATS and ClickHouse.
type childConns struct{ natsURL, addr, db *string }

func bindConns(fs *flag.FlagSet) childConns {
	return childConns{
		natsURL: fs.String("nats-url", "", "NATS URL"),
		addr:    fs.String("clickhouse-addr", "", "ClickHouse native address"),
		db:      fs.String("database", "", "ClickHouse database"),
	}
}

// open connects to NATS (as name) and opens the store (its statements
// at threadNice, chstore.Config.ThreadNice); closeConns closes both.
func (c childConns) open(ctx context.Context, name string, threadNice int) (nc *nats.Conn, js jetstream.JetStream, store *chstore.Store, closeConns func(), err error) {
	nc, err = nats.Connect(*c.natsURL, nats.Name(name))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if js, err = jetstream.New(nc); err == nil {
		store, err = chstore.Open(ctx, chstore.Config{Addr: *c.addr, Database: *c.db, ThreadNice: threadNice})
	}
	if err != nil {
		nc.Close()
		return nil, nil, nil, nil, err
	}
	return nc, js, store, func() { store.Close(); nc.Close() }, nil
}

// opsMux is a child's loopback-only ops server: /metrics, /debug/pprof/,
// and CPU and heap profiles written to the path the bench names.
func opsMux(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	var prof struct {
		sync.Mutex
		f *os.File
	}
	mux.HandleFunc("/cpu/start", func(w http.ResponseWriter, r *http.Request) {
		prof.Lock()
		defer prof.Unlock()
		f, err := os.Create(r.URL.Query().Get("path"))
		if err == nil {
			if err = rpprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		prof.f = f
	})
	mux.HandleFunc("/cpu/stop", func(w http.ResponseWriter, r *http.Request) {
		prof.Lock()
		defer prof.Unlock()
		if prof.f != nil {
			rpprof.StopCPUProfile()
			prof.f.Close()
			prof.f = nil
		}
	})
	mux.HandleFunc("/heap", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		f, err := os.Create(r.URL.Query().Get("path"))
		if err == nil {
			err = rpprof.WriteHeapProfile(f)
			f.Close()
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	return mux
}
