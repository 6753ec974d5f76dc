package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// httpProbe is G4's A/B for the protocol GET person's statement travels
// by: the bare driver's native protocol against ClickHouse's HTTP
// interface (a POST of the same statement, TabSeparated rows), 1.5 s of
// each in turn for `rounds` rounds. Over the native protocol 18.16 runs
// every SELECT on a thread it creates for it (AsynchronousBlockInputStream)
// and hands each block between that thread and the connection's; over
// HTTP the handler thread runs the statement itself. clickhouse-go's HTTP
// transport cannot talk to 18.16 (it sends client_protocol_version), hence
// the plain POST. Off unless -g4-http-probe is given (docs/performance.md,
// "after session 17").
func (s *session) httpProbe(ctx context.Context, ops *readOps, ids []uint64, rounds int) {
	addr := chHTTPAddr(s.ch)
	if addr == "" {
		s.lg.f("http probe: no HTTP port found; skipped")
		return
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	base := "http://" + addr + "/?database=" + benchDB + "&optimize_move_to_prewhere=0&priority=1"
	stmt := strings.Replace(strings.Replace(sqlGetPerson, "project_id = ?", "project_id = %d", 1), "id = ?", "id = %d", 1) + " FORMAT TabSeparated"
	httpGet := func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, "POST", base, strings.NewReader(fmt.Sprintf(stmt, s.project, ids[i%len(ids)])))
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || bytes.Count(b, []byte("\n")) != 1 {
			return fmt.Errorf("http %d: %.200s", resp.StatusCode, b)
		}
		return nil
	}
	if err := httpGet(ctx, 0); err != nil {
		s.lg.f("http probe: %v", err)
		return
	}
	var nat, htp []time.Duration
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		b := budget{N: 100_000, Max: 1500 * time.Millisecond}
		nat = append(nat, measureOnce(ctx, 1, b, r*1000, ops.rawGet).lat...)
		htp = append(htp, measureOnce(ctx, 1, b, r*1000+500, httpGet).lat...)
	}
	for _, x := range []struct {
		n string
		l []time.Duration
	}{{"native", nat}, {"http", htp}} {
		l := summarize(x.l)
		s.lg.f("http probe: %s: GET person c=1 n=%d p50=%.2f p90=%.2f p99=%.2f ms", x.n, l.N, l.P50ms, l.P90ms, l.P99ms)
	}
}

// chHTTPAddr is the server's HTTP address: the port its process listens on
// besides the native one ("" when not found).
func chHTTPAddr(ch *chServer) string {
	_, nport, _ := net.SplitHostPort(ch.addr)
	raw, _ := os.ReadFile("/proc/net/tcp")
	inodes := map[string]bool{}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", ch.pid))
	for _, fd := range fds {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", ch.pid, fd.Name()))
		if strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
			continue
		}
		var port int
		fmt.Sscanf(f[1][strings.IndexByte(f[1], ':')+1:], "%X", &port)
		if fmt.Sprint(port) != nport {
			return fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
	return ""
}

// selfNiceProbe is G4's A/B for this process's CPU priority: it runs the
// embedded NATS server and the load generator, at niceness 0 and 10 in
// turn, with GET person measured from the reader child (bare driver and
// HTTP API, 1.5 s each) for `rounds` rounds. Setting 0 back needs root.
// Off unless -g4-self-nice-probe is given (docs/performance.md, "after
// session 17").
func (s *session) selfNiceProbe(ctx context.Context, rounds int) {
	raw, api := s.reader.run("raw-get"), s.reader.run("api-get")
	defer setProcessNice(os.Getpid(), 0)
	var sides [2][2][]time.Duration
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		for i, n := range []int{0, 10} {
			if err := setProcessNice(os.Getpid(), n); err != nil {
				s.lg.f("self nice: %v", err)
				return
			}
			time.Sleep(200 * time.Millisecond)
			b := budget{N: 100_000, Max: 1500 * time.Millisecond}
			sides[i][0] = append(sides[i][0], raw(ctx, 1, b, r*1000).lat...)
			sides[i][1] = append(sides[i][1], api(ctx, 1, b, r*1000+500).lat...)
		}
	}
	for i, n := range []int{0, 10} {
		a, b := summarize(sides[i][0]), summarize(sides[i][1])
		s.lg.f("self nice %d: bare n=%d p50=%.2f p90=%.2f p99=%.2f; api n=%d p50=%.2f p90=%.2f p99=%.2f", n, a.N, a.P50ms, a.P90ms, a.P99ms, b.N, b.P50ms, b.P90ms, b.P99ms)
	}
}
