package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	if s.ch.srv == nil {
		s.lg.f("http probe: the server is not the bench's own (CLICKHOUSE_ADDR); skipped")
		return
	}
	addr := s.ch.srv.HTTPAddr()
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

// selfNiceProbe is G4's A/B for this process's CPU priority: it runs the
// embedded NATS server and the load generator, at niceness 0 and 10 in
// turn, with GET person measured from the reader child (probeSides).
// Setting 0 back needs root. Off unless -g4-self-nice-probe is given
// (docs/performance.md, "after session 17").
func (s *session) selfNiceProbe(ctx context.Context, rounds int) {
	defer setProcessNice(os.Getpid(), 0)
	levels := []int{0, 10}
	child := probeClients{raw: namedOp{run: s.reader.run("raw-get")}, api: namedOp{run: s.reader.run("api-get")}}
	s.probeSides(ctx, child, rounds, "self nice probe", []string{"bench process nice 0", "bench process nice 10"},
		func(i int) error { return setProcessNice(os.Getpid(), levels[i]) })
}
