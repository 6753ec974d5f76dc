package fault

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/personhub/personhub/pkg/chlocal"
	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/reference"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const module = "github.com/personhub/personhub/cmd/"

// stopLimit is the longest a binary may take to exit after SIGINT,
// whatever is down (docs/operations.md, "Stopping").
const stopLimit = 30 * time.Second

var interrupt = syscall.SIGINT

// system is one deployment under test: a private ClickHouse, an embedded
// NATS server, one project with a key, and the binaries' settings.
type system struct {
	t        *testing.T
	ch       *testenv.PrivateClickHouse
	nats     *testenv.NATS
	store    *chstore.Store // the database the binaries use, on ch
	key      string
	project  uint64
	personID string // the probe person, for retrieve and PATCH
	// probeProject holds only the probe person (distinct id fault-probe).
	probeProject uint64
	apiURL       string
	env          []string
	// published counts the events of publishMore.
	published int
}

func newSystem(t *testing.T) *system {
	s := &system{t: t, ch: testenv.StartPrivateClickHouse(t), nats: testenv.StartNATS(t, "")}
	s.store = s.ch.Store(t, "fault")
	ctx := context.Background()
	if err := stream.Ensure(ctx, s.nats.JS, stream.Config{}); err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Open(ctx, s.nats.JS, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	org, err := cp.CreateOrganization(ctx, "fault")
	if err != nil {
		t.Fatal(err)
	}
	proj, err := cp.CreateProject(ctx, org.ID, "fault")
	if err != nil {
		t.Fatal(err)
	}
	if s.key, _, err = cp.CreateKey(ctx, org.ID, "fault", []string{"*"}); err != nil {
		t.Fatal(err)
	}
	s.project = proj.ID
	// The load reads and PATCHes one person of a project of its own
	// (above the workload's projects 1 to 3), which no workload command
	// can merge, split or delete: a probe that always exists.
	for s.probeProject = proj.ID; s.probeProject <= 3; {
		probe, err := cp.CreateProject(ctx, org.ID, "fault-probe")
		if err != nil {
			t.Fatal(err)
		}
		s.probeProject = probe.ID
	}
	apiPort, metricsPort := freePort(t), freePort(t)
	s.apiURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	s.env = []string{
		"NATS_URL=" + s.nats.Server.ClientURL(),
		"CLICKHOUSE_ADDR=" + s.ch.Addr(),
		"CLICKHOUSE_DATABASE=fault",
		"INGESTER_BATCH_SIZE=150",
		"INGESTER_BATCH_WAIT=5ms",
		// Grown batches of at most 2.5 s: what the ack wait of 5 s once
		// set here capped growth to (half of it), kept as the test's size.
		"INGESTER_GROW_FOR=2500ms",
		// Grown batches of a few chunks: growth is on by default, and
		// the workload must take several commits for a fault to land
		// inside it.
		"INGESTER_GROW_PERSONS=300",
		fmt.Sprintf("INGESTER_METRICS_ADDR=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("API_ADDR=127.0.0.1:%d", apiPort),
		fmt.Sprintf("DELETER_METRICS_ADDR=127.0.0.1:%d", freePort(t)),
		// Not the default port: other tests' APIs may hold it.
		fmt.Sprintf("API_METRICS_ADDR=127.0.0.1:%d", freePort(t)),
		"API_WRITE_WAIT=100ms",
		// The load clients share one key; PostHog's per-key limits would
		// answer most of them 429 (tested in pkg/httpapi).
		"API_RATE_PER_MINUTE=0",
		"API_RATE_PER_HOUR=0",
	}
	return s
}

func freePort(t *testing.T) int {
	p, err := chlocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a binary of cmd/ with the system's settings.
func (s *system) start(bin string, args ...string) *testenv.Process {
	return testenv.StartProcess(s.t, bin, s.env, args...)
}

// startWith runs a binary with the system's settings and more.
func (s *system) startWith(bin string, env []string, args ...string) *testenv.Process {
	return testenv.StartProcess(s.t, bin, append(append([]string{}, s.env...), env...), args...)
}

// stop sends SIGINT and asserts the process exits within stopLimit.
func (s *system) stop(p *testenv.Process, name string) {
	s.t.Helper()
	took, err := p.Stop(s.t, interrupt, stopLimit)
	s.t.Logf("%s exited %s after SIGINT (%v)", name, took.Round(time.Millisecond), err)
}

// lastSeq is the stream's last sequence: every event published so far,
// the API's person writes included.
func (s *system) lastSeq() uint64 {
	s.t.Helper()
	st, err := s.nats.JS.Stream(context.Background(), stream.Events)
	if err != nil {
		s.t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return info.State.LastSeq
}

// startBusy publishes a workload of 12000 events, starts the ingester and
// the API (built by the test), waits until a quarter is folded and the API
// serves, and starts a load of 8 workers: the moment to inject a fault.
func (s *system) startBusy(seed int64) (last uint64, ing, srv *testenv.Process, l *load) {
	s.t.Helper()
	ingester, api := testenv.Build(s.t, module+"ingester"), testenv.Build(s.t, module+"api")
	probe := testenv.Message{Body: `{"event":"$pageview","distinct_id":"fault-probe","properties":{}}`}
	if _, err := testenv.Publish(context.Background(), s.nats.JS, s.probeProject, probe,
		"6f1c2c1e-0000-4000-8000-000000000001", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		s.t.Fatal(err)
	}
	last = testenv.PublishWorkload(s.t, s.nats.JS, 0, testenv.Workload(seed, 12000, 400))
	ing, srv = s.start(ingester, "run"), s.start(api, "run")
	testenv.WaitCommitted(s.t, s.store, "ingester", last/4, time.Minute)
	s.waitServing(30 * time.Second)
	l = s.startLoad(8)
	time.Sleep(300 * time.Millisecond)
	return last, ing, srv, l
}

// publishMore publishes n more events of the workload.
func (s *system) publishMore(n int) {
	s.t.Helper()
	s.published += n
	testenv.PublishWorkload(s.t, s.nats.JS, 1_000_000+s.published, testenv.Workload(int64(s.published), n, 400))
}

// delivered is the last stream sequence the ingester's consumer has
// delivered.
func (s *system) delivered() uint64 { return consumerDelivered(s.t, s.nats.JS) }

// committed is the ingester's last commit, retried while ClickHouse comes
// back.
func (s *system) committed() uint64 {
	s.t.Helper()
	var seq uint64
	testenv.WaitFor(s.t, time.Minute, "reading the last commit", func() (bool, error) {
		var err error
		seq, err = s.store.LastCommitted(context.Background(), "ingester")
		return err == nil, err
	})
	return seq
}

// assertEqualsReference compares the system's database with an
// uninterrupted fold of the same stream.
func (s *system) assertEqualsReference(what string) {
	s.t.Helper()
	ref := reference.Run(s.t, s.nats.JS, "reference", s.lastSeq())
	if got, want := testenv.Snapshot(s.t, s.store), testenv.Snapshot(s.t, ref); got != want {
		s.t.Fatalf("state after %s differs from an uninterrupted run:\n%s", what, testenv.FirstDiff(got, want))
	}
}

// request sends one API request with the key.
func (s *system) request(method, path, body string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, s.apiURL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

// waitServing waits until the API answers a persons list with 200, and
// remembers a person id.
func (s *system) waitServing(limit time.Duration) {
	s.t.Helper()
	testenv.WaitFor(s.t, limit, "the API serving persons", func() (bool, error) {
		code, _, body, err := s.request("GET", s.probePath()+"?distinct_id=fault-probe", "")
		if err != nil || code != 200 {
			return false, fmt.Errorf("%d %v %.200s", code, err, body)
		}
		if i := strings.Index(body, `"id":`); i >= 0 && s.personID == "" {
			rest := body[i+5:]
			s.personID = rest[:strings.IndexAny(rest, ",}")]
		}
		return s.personID != "", nil
	})
}

func (s *system) personsPath() string { return fmt.Sprintf("/api/projects/%d/persons/", s.project) }

func (s *system) probePath() string { return fmt.Sprintf("/api/projects/%d/persons/", s.probeProject) }

// load sends reads and writes in a loop until stop, recording each answer
// under the phase it was sent and answered in.
type load struct {
	mu      sync.Mutex
	phase   string
	answers map[string]map[string]int // phase -> "METHOD status" -> count
	bad     []string                  // answers that are never allowed
	noRetry []string                  // 503s without Retry-After
	stop    chan struct{}
	done    sync.WaitGroup
}

func (s *system) startLoad(workers int) *load {
	l := &load{phase: "up", answers: map[string]map[string]int{}, stop: make(chan struct{})}
	// The unfiltered list is recorded as LIST: the API keeps its pages by
	// the ingester's watermark (pkg/chstore/listmark.go), so it may answer
	// from them while ClickHouse is down and the watermark cannot move.
	paths := []struct{ label, method, path, body string }{
		{"LIST", "GET", s.personsPath() + "?limit=20", ""},
		{"GET", "GET", s.probePath() + s.personID + "/", ""},
		{"GET", "GET", s.personsPath() + "?search=u1", ""},
		{"PATCH", "PATCH", s.probePath() + s.personID + "/", ""},
	}
	for w := range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				// One route per worker: a route that hangs
				// (a write while NATS is down) holds only its own.
				r := paths[w%len(paths)]
				body := r.body
				if r.method == "PATCH" {
					body = fmt.Sprintf(`{"properties":{"fault_w%d":%d}}`, w, n)
				}
				sent := l.current()
				code, h, resp, err := s.request(r.method, r.path, body)
				// A request that spans a change of phase (sent while
				// ClickHouse was up, answered after it died) belongs
				// to neither: it is counted, and checked against
				// never-allowed answers, as a transition.
				phase := sent
				if now := l.current(); now != sent {
					phase = sent + " -> " + now
				}
				l.record(phase, r.label, code, h, resp, err)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *load) current() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

func (l *load) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *load) record(phase, method string, code int, h http.Header, body string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.answers[phase] == nil {
		l.answers[phase] = map[string]int{}
	}
	key := fmt.Sprintf("%s %d", method, code)
	if err != nil {
		// A dropped connection is never allowed either.
		key = method + " error"
		l.bad = append(l.bad, fmt.Sprintf("%s %s: %v", phase, method, err))
	}
	l.answers[phase][key]++
	switch {
	case code >= 500 && code != 503:
		l.bad = append(l.bad, fmt.Sprintf("%s %s: %d %.300s", phase, method, code, body))
	case code == 503 && h.Get("Retry-After") == "":
		l.noRetry = append(l.noRetry, fmt.Sprintf("%s %s: 503 without Retry-After", phase, method))
	}
}

// finish stops the load and reports the answers.
func (l *load) finish(t *testing.T) {
	close(l.stop)
	l.done.Wait()
	t.Logf("answers by phase: %v", l.answers)
}

// assertNo5xx: no answer other than 503 in 5xx, no dropped connection.
func (l *load) assertNo5xx(t *testing.T) {
	t.Helper()
	if len(l.bad) > 0 {
		t.Errorf("%d answers that must never happen, first: %s", len(l.bad), strings.Join(l.bad[:min(5, len(l.bad))], "\n"))
	}
	if len(l.noRetry) > 0 {
		t.Errorf("%d 503s without Retry-After, first: %s", len(l.noRetry), l.noRetry[0])
	}
}

// assertOnly: in phase, method got only the given statuses (and at least
// one answer).
func (l *load) assertOnly(t *testing.T, phase, method string, codes ...int) bool {
	t.Helper()
	ok := true
	allowed := map[string]bool{}
	for _, c := range codes {
		allowed[fmt.Sprintf("%s %d", method, c)] = true
	}
	n := 0
	for k, v := range l.answers[phase] {
		if !strings.HasPrefix(k, method+" ") {
			continue
		}
		n += v
		if !allowed[k] {
			t.Errorf("during %s: %d answers %q, want only %v", phase, v, k, codes)
			ok = false
		}
	}
	if n == 0 {
		t.Errorf("no %s request sent during %s was answered in that phase (they hang)", method, phase)
		ok = false
	}
	return ok
}

// firstLines returns up to n lines of log that contain what.
func firstLines(log, what string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, what) && len(out) < n {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// consumerDelivered reads the consumer's delivered sequence without the
// system (for a stack whose NATS is its own).
func consumerDelivered(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	floor, err := testenv.Delivered(context.Background(), js, "ingester")
	if err != nil {
		t.Fatal(err)
	}
	return floor
}
