// Command capture is the capture load test: how many events per second
// POST /batch/ accepts (decoded, validated as the ingester would, published
// and acknowledged by JetStream before the answer) against the raw rate of
// publishing the same events to JetStream asynchronously, in the same run.
//
//	go run ./bench/capture [-events 200000] [-batch 100] [-clients 8] [-gzip] [-rounds 5]
//
// Everything runs in this process on loopback: an embedded JetStream
// server with file storage under a temporary folder, the control plane on
// it, and the API's capture routes over net/http. ClickHouse is not
// needed: capture does not read or write it. Each phase starts on an
// empty stream; the median round of each phase and the median of the
// rounds' own ratios (raw and /batch/ run back to back) are reported, as a JSON
// line (for other tools) and a table. `make bench-capture` runs it.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/httpapi"
	"github.com/personhub/personhub/pkg/stream"
)

type options struct {
	events, batch, clients, rounds, window int
	gzip                                   bool
	cpuProfile                             string
}

// result is one run's report.
type result struct {
	Bench           string    `json:"bench"`
	Events          int       `json:"events"`
	Batch           int       `json:"batch"`
	Clients         int       `json:"clients"`
	Gzip            bool      `json:"gzip"`
	Rounds          int       `json:"rounds"`
	EventBytes      int       `json:"event_bytes_avg"`
	RawPerSec       float64   `json:"raw_events_per_sec"`
	HTTPPerSec      float64   `json:"http_events_per_sec"`
	Ratio           float64   `json:"http_to_raw_ratio"`
	RoundRatios     []float64 `json:"round_ratios"`
	LoadAvg         string    `json:"load_avg_start"`
	RequestP50Ms    float64   `json:"request_p50_ms"`
	RequestP99Ms    float64   `json:"request_p99_ms"`
	StoredAfterHTTP uint64    `json:"stored_after_http"`
	CPUs            int       `json:"cpus"`
	GoVersion       string    `json:"go_version"`
}

func main() {
	var o options
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.IntVar(&o.events, "events", 200_000, "events per phase and round")
	fs.IntVar(&o.batch, "batch", 100, "events per /batch/ request")
	fs.IntVar(&o.clients, "clients", 8, "concurrent HTTP clients (and raw publishers)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of both phases, back to back; the median of the rounds' ratios is reported")
	fs.IntVar(&o.window, "window", 1000, "asynchronous publishes awaiting acknowledgement, per request or raw publisher")
	fs.BoolVar(&o.gzip, "gzip", false, "send gzip bodies (Content-Encoding: gzip), compressed before timing")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the /batch/ phases (the whole process) to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		os.Exit(2)
	}
	if o.events < 1 || o.batch < 1 || o.clients < 1 || o.rounds < 1 || o.window < 1 {
		fmt.Fprintln(os.Stderr, "capture: -events, -batch, -clients, -rounds and -window must be positive")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, err := os.MkdirTemp("", "personhub-bench-capture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// JetStream, embedded; stopped after the HTTP server (deferred first).
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		return err
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		return errors.New("embedded NATS did not start")
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("bench-capture"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(o.clients*o.window))
	if err != nil {
		return err
	}
	if err := stream.Ensure(ctx, js, stream.Config{}); err != nil {
		return err
	}
	events, err := js.Stream(ctx, stream.Events)
	if err != nil {
		return err
	}
	cp, err := controlplane.Open(ctx, js, log)
	if err != nil {
		return err
	}
	defer cp.Close()
	org, err := cp.CreateOrganization(ctx, "bench")
	if err != nil {
		return err
	}
	project, err := cp.CreateProject(ctx, org.ID, "bench")
	if err != nil {
		return err
	}
	if err := waitForToken(ctx, cp, project.APIToken); err != nil {
		return err
	}

	// The API with only what capture needs: no ClickHouse behind it.
	reg := prometheus.NewRegistry()
	pub, err := capture.NewPublisher(capture.Config{Window: o.window}, js, cp, log, reg)
	if err != nil {
		return err
	}
	api, err := httpapi.New(httpapi.Config{}, httpapi.Deps{Keys: cp, Log: log, Reg: reg,
		Ready: func(context.Context) error { return nil }, Capture: pub})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/batch/"

	res := result{Bench: "capture", Events: o.events, Batch: o.batch, Clients: o.clients, Gzip: o.gzip, Rounds: o.rounds,
		CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvg: loadAvg()}
	var raws, https []float64
	var latencies []time.Duration
	for round := 0; round < o.rounds; round++ {
		// Fresh uuids every phase, so nothing is deduplicated away.
		envs, size := makeEvents(o.events, round)
		res.EventBytes = size
		if err := events.Purge(ctx); err != nil {
			return err
		}
		raw, err := rawPhase(ctx, js, project.ID, envs, o)
		if err != nil {
			return fmt.Errorf("raw publishing: %w", err)
		}
		raws = append(raws, raw)

		envs, _ = makeEvents(o.events, round)
		bodies, err := makeBodies(project.APIToken, envs, o)
		if err != nil {
			return err
		}
		if err := events.Purge(ctx); err != nil {
			return err
		}
		if o.cpuProfile != "" && round == 0 {
			f, err := os.Create(o.cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
		}
		rate, lat, err := httpPhase(ctx, url, bodies, o)
		if o.cpuProfile != "" && round == 0 {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return fmt.Errorf("/batch/: %w", err)
		}
		https = append(https, rate)
		res.RoundRatios = append(res.RoundRatios, rate/raw)
		latencies = append(latencies, lat...)
		info, err := events.Info(ctx)
		if err != nil {
			return err
		}
		if res.StoredAfterHTTP = info.State.Msgs; res.StoredAfterHTTP != uint64(o.events) {
			return fmt.Errorf("round %d: the stream holds %d events after /batch/ accepted %d", round, info.State.Msgs, o.events)
		}
		fmt.Fprintf(os.Stderr, "round %d: raw %.0f events/s, /batch/ %.0f events/s, ratio %.2f\n", round+1, raw, rate, rate/raw)
	}
	// The ratio is the median of each round's own ratio: the two phases of
	// a round run back to back, under about the same load from elsewhere,
	// while the medians of the rates may come from different rounds (on a
	// shared machine the rates swing threefold between rounds).
	res.RawPerSec, res.HTTPPerSec = median(raws), median(https)
	res.Ratio = median(res.RoundRatios)
	slices.Sort(latencies)
	res.RequestP50Ms = ms(latencies[len(latencies)/2])
	res.RequestP99Ms = ms(latencies[len(latencies)*99/100])

	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	fmt.Printf("\ncapture load test: %d events per round, %d per request, %d clients, gzip %v, %d rounds (median), %d CPUs, load average %s at the start\n",
		o.events, o.batch, o.clients, o.gzip, o.rounds, res.CPUs, res.LoadAvg)
	fmt.Printf("  %-44s %12s\n", "measure", "value")
	fmt.Printf("  %-44s %12.0f\n", "raw JetStream async publish (events/s)", res.RawPerSec)
	fmt.Printf("  %-44s %12.0f\n", "POST /batch/ accepted (events/s)", res.HTTPPerSec)
	fmt.Printf("  %-44s %12.2f\n", "/batch/ ÷ raw (median of the rounds' ratios)", res.Ratio)
	fmt.Printf("  %-44s %12.1f\n", "request latency p50 (ms)", res.RequestP50Ms)
	fmt.Printf("  %-44s %12.1f\n", "request latency p99 (ms)", res.RequestP99Ms)
	fmt.Printf("  %-44s %12d\n", "average event (bytes)", res.EventBytes)
	return nil
}

// waitForToken waits until the control plane's index knows the token.
func waitForToken(ctx context.Context, cp *controlplane.Store, token string) error {
	for {
		if _, ok := cp.ProjectByToken(token); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type envelope struct {
	id   string
	data []byte
}

// makeEvents makes complete envelopes, as a server-side library sends
// them: uuid, name, distinct id, timestamp, a few properties, and $set on
// one event in four.
func makeEvents(n, round int) ([]envelope, int) {
	out := make([]envelope, n)
	total := 0
	ts := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range out {
		id := uuid.NewString()
		ev := map[string]any{
			"uuid": id, "event": []string{"$pageview", "signed_up", "checkout", "$autocapture"}[i%4],
			"distinct_id": fmt.Sprintf("user-%d", i%20_000),
			"timestamp":   ts.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano),
			"properties": map[string]any{
				"$current_url": fmt.Sprintf("https://shop.example/products/%d", i%500),
				"$browser":     "Firefox", "$os": "Linux", "$lib": "bench", "round": round, "amount": float64(i%1000) / 10,
			},
		}
		if i%4 == 1 {
			ev["$set"] = map[string]any{"plan": []string{"free", "pro", "team"}[i%3], "email": fmt.Sprintf("user-%d@example.com", i%20_000)}
		}
		data, _ := json.Marshal(ev)
		out[i] = envelope{id: id, data: data}
		total += len(data)
	}
	return out, total / n
}

// makeBodies groups events into /batch/ request bodies.
func makeBodies(token string, envs []envelope, o options) ([][]byte, error) {
	var bodies [][]byte
	for start := 0; start < len(envs); start += o.batch {
		var b bytes.Buffer
		b.WriteString(`{"api_key":`)
		key, _ := json.Marshal(token)
		b.Write(key)
		b.WriteString(`,"batch":[`)
		for i, env := range envs[start:min(start+o.batch, len(envs))] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(env.data)
		}
		b.WriteString(`]}`)
		body := b.Bytes()
		if o.gzip {
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			if _, err := w.Write(body); err != nil {
				return nil, err
			}
			if err := w.Close(); err != nil {
				return nil, err
			}
			body = z.Bytes()
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// rawPhase publishes the envelopes from o.clients goroutines, each with
// its own window of asynchronous publishes, and returns events per second
// once all are acknowledged.
func rawPhase(ctx context.Context, js jetstream.JetStream, projectID uint64, envs []envelope, o options) (float64, error) {
	subject := stream.Subject(projectID)
	var wg sync.WaitGroup
	errs := make(chan error, o.clients)
	start := time.Now()
	for c := 0; c < o.clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var pending []jetstream.PubAckFuture
			wait := func(f jetstream.PubAckFuture) error {
				select {
				case <-f.Ok():
					return nil
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			for i := c; i < len(envs); i += o.clients {
				if len(pending) == o.window {
					if err := wait(pending[0]); err != nil {
						errs <- err
						return
					}
					pending = pending[1:]
				}
				msg := nats.NewMsg(subject)
				msg.Data = envs[i].data
				msg.Header.Set(jetstream.MsgIDHeader, envs[i].id)
				f, err := js.PublishMsgAsync(msg, jetstream.WithExpectStream(stream.Events), jetstream.WithStallWait(30*time.Second))
				if err != nil {
					errs <- err
					return
				}
				pending = append(pending, f)
			}
			for _, f := range pending {
				if err := wait(f); err != nil {
					errs <- err
					return
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(len(envs)) / elapsed.Seconds(), nil
}

// httpPhase posts the bodies from o.clients goroutines over keep-alive
// connections and returns accepted events per second and each request's
// latency. Any answer but 200 fails the run.
func httpPhase(ctx context.Context, url string, bodies [][]byte, o options) (float64, []time.Duration, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.clients, MaxConnsPerHost: o.clients}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var accepted atomic.Int64
	latencies := make([]time.Duration, len(bodies))
	errs := make(chan error, o.clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < o.clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				if o.gzip {
					req.Header.Set("Content-Encoding", "gzip")
				}
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				latencies[i] = time.Since(t0)
				if res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d: %s", res.StatusCode, body)
					return
				}
				accepted.Add(int64(min(o.batch, o.events-i*o.batch)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	return float64(accepted.Load()) / elapsed.Seconds(), latencies, nil
}

// loadAvg is the machine's 1, 5 and 15 minute load averages, or "" where
// /proc/loadavg does not exist: the rates depend on it.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
