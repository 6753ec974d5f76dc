package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
)

// chServer is the server the run measures: a private child server under
// the run's temp dir, or $CLICKHOUSE_ADDR.
type chServer struct {
	addr    string
	pid     int // 0 when the server process is not visible from here
	srv     *chlocal.Server
	version string
	// queryLog: the server logs every statement to system.query_log (a
	// server this bench started, for a scale run: S3's breakdown).
	queryLog bool
}

func startClickHouse(ctx context.Context, dir string, queryLog bool) (*chServer, error) {
	ch := &chServer{}
	if a := os.Getenv("CLICKHOUSE_ADDR"); a != "" {
		ch.addr = a
	} else {
		chDir := filepath.Join(dir, "clickhouse")
		if err := os.MkdirAll(chDir, 0o755); err != nil {
			return nil, err
		}
		log, err := os.Create(filepath.Join(dir, "clickhouse.log"))
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		var opts []chlocal.Option
		if queryLog {
			opts = append(opts, chlocal.WithQueryLog())
		}
		srv, err := chlocal.Start(sctx, chDir, 0, 0, log, opts...)
		if err != nil {
			return nil, err
		}
		ch.srv, ch.addr, ch.queryLog = srv, srv.Addr(), queryLog
	}
	_, port, err := net.SplitHostPort(ch.addr)
	if err != nil {
		ch.stop()
		return nil, fmt.Errorf("clickhouse address %q: %w", ch.addr, err)
	}
	if p, err := strconv.Atoi(port); err == nil {
		ch.pid = listenerPID(p)
	}
	st, err := chstore.Open(ctx, chstore.Config{Addr: ch.addr, Database: "default", ReadTimeout: benchStatementTimeout})
	if err != nil {
		ch.stop()
		return nil, err
	}
	defer st.Close()
	if err := st.Conn().QueryRow(ctx, "SELECT version()").Scan(&ch.version); err != nil {
		ch.stop()
		return nil, err
	}
	return ch, nil
}

func (c *chServer) stop() {
	if c.srv != nil {
		c.srv.Stop()
	}
}

// hostPort splits the native address for clickhouse-client.
func (c *chServer) hostPort() (string, string) {
	h, p, _ := net.SplitHostPort(c.addr)
	return h, p
}

// benchStatementTimeout bounds the bench's own statements (copies, the
// hand-tuned tables, the replay's table sums), which run for minutes at
// -scale 10: clickhouse-go's ReadTimeout is a deadline on a whole
// statement, and the store's default (60 s) suits the service's
// statements, not these.
const benchStatementTimeout = 3 * time.Hour

// openDB opens (creating and migrating) a database on the server, for the
// bench's own statements.
func (c *chServer) openDB(ctx context.Context, name string) (*chstore.Store, error) {
	st, err := chstore.Open(ctx, chstore.Config{Addr: c.addr, Database: name, ReadTimeout: benchStatementTimeout})
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	return st, nil
}

// open opens a database without migrating it, for the bench's own
// statements.
func (c *chServer) open(ctx context.Context, name string) (*chstore.Store, error) {
	return chstore.Open(ctx, chstore.Config{Addr: c.addr, Database: name, ReadTimeout: benchStatementTimeout})
}

// openService opens a database as the service's binaries do (the store's
// defaults), for a service component the bench runs in process: the
// deleter's purge is measured with the deadlines it has in production.
func (c *chServer) openService(ctx context.Context, name string) (*chstore.Store, error) {
	return chstore.Open(ctx, chstore.Config{Addr: c.addr, Database: name})
}

// natsEnv is the embedded JetStream server (file storage in the run's
// temp dir) and the bench's own client connection.
type natsEnv struct {
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	url  string
	pubs jetstream.JetStream // for bulk publishing: async window of 4000
}

func startNATS(dir string) (*natsEnv, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "bench", Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true,
	})
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		return nil, fmt.Errorf("embedded NATS did not start")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.Name("bench"))
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	pubs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000))
	if err != nil {
		return nil, err
	}
	return &natsEnv{srv: srv, nc: nc, js: js, url: srv.ClientURL(), pubs: pubs}, nil
}

func (n *natsEnv) stop() {
	n.nc.Close()
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}

// Machine describes where the run happened.
type Machine struct {
	Hostname      string `json:"hostname"`
	NProc         int    `json:"nproc"`
	MemTotalBytes int64  `json:"mem_total_bytes"`
	CPUModel      string `json:"cpu_model"`
	Kernel        string `json:"kernel"`
	GoVersion     string `json:"go_version"`
	ClickHouse    string `json:"clickhouse_version"`
	ClickHouseAt  string `json:"clickhouse_addr"`
	NATSServer    string `json:"nats_server_version"`
	NATSClient    string `json:"nats_go_version"`
	// DataDir is the run's temp dir (TMPDIR), which holds the private
	// ClickHouse's and JetStream's data; DataFS its filesystem.
	DataDir string `json:"data_dir"`
	DataFS  string `json:"data_fs"`
}

// describeFS names the filesystem holding dir: its type, device and mount
// point, and for ext4 whether it has a journal. Without one, ext4 checks
// each free inode it finds against recent deletions before handing it
// out (find_inode_bit, recently_deleted), which under ClickHouse's parts
// (a file per column, created and deleted by every insert and merge) cost
// ClickHouse up to 40% of its CPU in the ingest phase (docs/performance.md,
// "Where the data lives").
func describeFS(dir string) string {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "unknown"
	}
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		abs = dir
	}
	var point, typ, dev string
	for _, line := range strings.Split(string(raw), "\n") {
		left, right, ok := strings.Cut(line, " - ")
		lf, rf := strings.Fields(left), strings.Fields(right)
		if !ok || len(lf) < 5 || len(rf) < 2 {
			continue
		}
		mp := lf[4]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(point) {
			point, typ, dev = mp, rf[0], rf[1]
		}
	}
	if typ == "" {
		return "unknown"
	}
	out := typ + " on " + dev + " at " + point
	if typ == "ext4" {
		if j, err := os.ReadFile(filepath.Join("/sys/fs/ext4", filepath.Base(dev), "journal_task")); err == nil {
			if strings.TrimSpace(string(j)) == "<none>" {
				out += " (no journal)"
			} else {
				out += " (journal)"
			}
		}
	}
	return out
}

func describeMachine(ch *chServer) Machine {
	m := Machine{
		NProc: runtime.NumCPU(), GoVersion: runtime.Version(), ClickHouse: ch.version, ClickHouseAt: ch.addr,
		NATSServer: server.VERSION, NATSClient: nats.Version,
	}
	m.Hostname, _ = os.Hostname()
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	m.MemTotalBytes = meminfo("MemTotal")
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return m
}

func meminfo(key string) int64 {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

// procCPU returns a process's user+system CPU time from /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, cpu, _ := statCPU(raw)
	return cpu
}

// statCPU reads a /proc stat line (a process's or a thread's): its name
// (comm) and its user+system CPU time.
func statCPU(raw []byte) (name string, cpu time.Duration, ok bool) {
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return "", 0, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return s[open+1 : closing], time.Duration(utime+stime) * time.Second / clockTick, true
}

// procRSS returns VmRSS and VmHWM of a process, in bytes.
func procRSS(pid int) (rss, hwm int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmHWM":
			hwm = n * 1024
		}
	}
	return rss, hwm
}

// listenerPID finds the process listening on a loopback TCP port, through
// the socket inode in /proc/net/tcp{,6} and the processes' descriptors.
func listenerPID(port int) int {
	inodes := map[string]bool{}
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && inodes[target] {
				return pid
			}
		}
	}
	return 0
}

// cpuMeter measures the CPU time of a few processes over an interval.
type cpuMeter struct {
	pids  []int
	start []time.Duration
	t0    time.Time
}

func newCPUMeter(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, t0: time.Now()}
	for _, p := range pids {
		m.start = append(m.start, procCPU(p))
	}
	return m
}

// stop returns each process's CPU seconds since the meter started.
func (m *cpuMeter) stop() []float64 {
	out := make([]float64, len(m.pids))
	for i, p := range m.pids {
		out[i] = (procCPU(p) - m.start[i]).Seconds()
	}
	return out
}

// systemBusy is the machine's busy CPU time (all cores) from /proc/stat.
func systemBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is counted in user already
			continue
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTick
}

// loadAvg is the 1-minute load average.
func loadAvg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
