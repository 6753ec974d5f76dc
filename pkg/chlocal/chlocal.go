// Package chlocal runs a private ClickHouse server as a child process,
// with its data, configuration and logs under one folder. `make run` and
// the integration tests use it; production points at its own ClickHouse.
package chlocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotInstalled says no ClickHouse server binary was found.
var ErrNotInstalled = errors.New("no ClickHouse server found: install Debian's package (`sudo apt-get install clickhouse-server`, as .ci/run does), or put `clickhouse-server` or `clickhouse` on PATH, or set CLICKHOUSE_ADDR to a running server")

// Server is a running child clickhouse-server.
type Server struct {
	cmd      *exec.Cmd
	addr     string
	httpAddr string
	done     chan struct{}
	err      error
}

// Find returns the command that starts a server: $CLICKHOUSE_SERVER,
// clickhouse-server (Debian), or clickhouse (the single binary of current
// releases) with its "server" argument.
func Find() ([]string, error) {
	if p := os.Getenv("CLICKHOUSE_SERVER"); p != "" {
		return []string{p}, nil
	}
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return []string{p}, nil
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"} {
		if _, err := os.Stat(p); err == nil {
			return []string{p}, nil
		}
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}, nil
	}
	return nil, ErrNotInstalled
}

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Option changes the configuration Start writes.
type Option func(*options)

type options struct{ queryLog bool }

// WithQueryLog has the server log every statement to system.query_log
// (flushed every second): the integration tests record what they send
// there, so that it can be replayed on another ClickHouse version
// (test/portability).
func WithQueryLog() Option { return func(o *options) { o.queryLog = true } }

// Start writes a configuration under dir and starts the server on
// 127.0.0.1:tcpPort (native) and httpPort, waiting until it answers.
// Ports of 0 are chosen free. Data under dir survives a restart.
func Start(ctx context.Context, dir string, tcpPort, httpPort int, logFile *os.File, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	argv, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range []*int{&tcpPort, &httpPort} {
		if *p == 0 {
			if *p, err = FreePort(); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "data", "tmp"), 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.xml")
	if err := os.WriteFile(cfg, []byte(config(dir, tcpPort, httpPort, o)), 0o644); err != nil {
		return nil, err
	}
	args := append(argv[1:], "--config-file="+cfg)
	cmd := exec.Command(argv[0], args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so a Ctrl-C in the terminal reaches the parent
	// only, which then stops the server in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	s := &Server{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort)),
		httpAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)), done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	if err := s.wait(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Addr is host:port of the native protocol.
func (s *Server) Addr() string { return s.addr }

// HTTPAddr is host:port of the HTTP interface.
func (s *Server) HTTPAddr() string { return s.httpAddr }

func (s *Server) wait(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("clickhouse-server exited during start: %v (see its log)", s.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("clickhouse-server did not listen on %s within %s", s.addr, limit)
}

// Exited reports, without waiting, whether the server has exited and
// with what: a crash or the OOM killer during tests shows up here.
func (s *Server) Exited() (bool, error) {
	select {
	case <-s.done:
		return true, s.err
	default:
		return false, nil
	}
}

// Stop asks the server to shut down and waits for it (killing it after 30s).
func (s *Server) Stop() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return nil
}

// Kill stops the server with SIGKILL, as a crash or the OOM killer would,
// and waits for it to exit; fault tests use it. Its data stays under dir
// for a restart.
func (s *Server) Kill() {
	if s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

func config(dir string, tcpPort, httpPort int, o options) string {
	logQueries, queryLog := "", ""
	if o.queryLog {
		// Whole statements: the log cuts them at 100,000 bytes by default.
		logQueries = "<log_queries>1</log_queries><log_queries_cut_to_length>100000000</log_queries_cut_to_length>"
		queryLog = "<query_log><database>system</database><table>query_log</table><flush_interval_milliseconds>1000</flush_interval_milliseconds></query_log>"
	}
	r := strings.NewReplacer("{dir}", filepath.Join(dir, "data"), "{tcp}", strconv.Itoa(tcpPort), "{http}", strconv.Itoa(httpPort),
		"{log_queries}", logQueries, "{query_log}", queryLog)
	return r.Replace(`<?xml version="1.0"?>
<!-- Written by personhub (pkg/chlocal); rewritten on every start. -->
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <timezone>UTC</timezone>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{tcp}</tcp_port>
  <http_port>{http}</http_port>
  <path>{dir}/</path>
  <tmp_path>{dir}/tmp/</tmp_path>
  <user_files_path>{dir}/user_files/</user_files_path>
  <format_schema_path>{dir}/format_schemas/</format_schema_path>
  <mark_cache_size>268435456</mark_cache_size>
  <!-- Above the pools that share this server: api and ingester in one
       process (make run) or each test's store, 64 each (pkg/chstore). -->
  <max_concurrent_queries>200</max_concurrent_queries>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
    <!-- The service's user on a ClickHouse cluster (docs/operations.md,
         "On a ClickHouse cluster"), as far as tables without
         replication need it. -->
    <personhub_cluster>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>personhub_cluster</profile>
      <quota>default</quota>
    </personhub_cluster>
  </users>
  <profiles>
    <default>{log_queries}</default>
    <personhub_cluster>
      {log_queries}
      <distributed_product_mode>local</distributed_product_mode>
      <insert_distributed_sync>1</insert_distributed_sync>
    </personhub_cluster>
  </profiles>
  <quotas><default></default></quotas>
  {query_log}
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <!-- Clusters of this server alone, so that the cluster DDL of
       docs/operations.md runs here (schema/cluster_test.go) and the
       service runs on Distributed tables over two shards, each shard a
       database of its own (testenv.ShardedClickHouse). -->
  <remote_servers>
    <personhub>
      <shard>
        <internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>{tcp}</port></replica>
      </shard>
    </personhub>
    <personhub_two_shards>
      <shard>
        <internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>{tcp}</port><default_database>personhub_shard1</default_database></replica>
      </shard>
      <shard>
        <internal_replication>true</internal_replication>
        <replica><host>127.0.0.1</host><port>{tcp}</port><default_database>personhub_shard2</default_database></replica>
      </shard>
    </personhub_two_shards>
  </remote_servers>
</yandex>
`)
}
