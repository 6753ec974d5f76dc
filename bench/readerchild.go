package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/personhub/personhub/pkg/chstore"
)

// readerChildCommand is the first argument that makes the bench binary
// run GET person's clients (GET person through the bare driver and through the
// HTTP API) in a process of their own, as a user's client runs: apart
// from the load. In the bench process they shared a Go runtime with the
// load generator and the embedded NATS server, and a heap holding the
// whole dataset: while ingesting, the bench's collections took a quarter
// of its CPU, and its busy goroutines and mark assists delayed the
// clients' own goroutines, the bare driver's included. The API left the
// bench process for the same reason (apichild.go).
const readerChildCommand = "reader-child"

// remoteSamples is a measurement made by the reader child (samples, on
// the wire).
type remoteSamples struct {
	LatNS     []int64 `json:"lat_ns"`
	Errs      int     `json:"errs"`
	FirstErr  string  `json:"first_err,omitempty"`
	ElapsedNS int64   `json:"elapsed_ns"`
}

func readerChildMain(args []string) error {
	fs := flag.NewFlagSet(readerChildCommand, flag.ContinueOnError)
	addr := fs.String("clickhouse-addr", "", "ClickHouse native address")
	db := fs.String("database", "", "ClickHouse database")
	api := fs.String("api", "", "the HTTP API's base URL")
	key := fs.String("key", "", "personal API key")
	project := fs.Uint64("project", 0, "the persons' project")
	idList := fs.String("ids", "", "person ids to read, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ids []uint64
	for _, f := range strings.Split(*idList, ",") {
		id, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return fmt.Errorf("-ids: %w", err)
		}
		ids = append(ids, id)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, err := chstore.Open(ctx, chstore.Config{Addr: *addr, Database: *db})
	if err != nil {
		return err
	}
	defer store.Close()
	conn, a := store.Conn(), &apiServer{base: *api, key: *key, project: *project, hc: newAPIClient()}
	id := func(i int) uint64 { return ids[i%len(ids)] }
	ops := map[string]func(ctx context.Context, i int) error{
		"raw-get": func(ctx context.Context, i int) error { return rawGetPerson(ctx, conn, *project, id(i)) },
		"api-get": func(ctx context.Context, i int) error {
			_, err := a.get(ctx, a.personPath(id(i)))
			return err
		},
	}
	mux := opsMux(prometheus.NewRegistry())
	mux.HandleFunc("/measure", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		op, ok := ops[q.Get("op")]
		conc, err1 := strconv.Atoi(q.Get("conc"))
		n, err2 := strconv.Atoi(q.Get("n"))
		offset, err3 := strconv.Atoi(q.Get("offset"))
		limit, err4 := time.ParseDuration(q.Get("max"))
		if err := errors.Join(err1, err2, err3, err4); !ok || err != nil || conc < 1 {
			http.Error(w, fmt.Sprintf("bad measurement %q: %v", r.URL.RawQuery, err), http.StatusBadRequest)
			return
		}
		s := measureOnce(r.Context(), conc, budget{N: n, Max: limit}, offset, op)
		out := remoteSamples{Errs: s.errs, FirstErr: s.firstErr, ElapsedNS: int64(s.elapsed), LatNS: make([]int64, len(s.lat))}
		for k, d := range s.lat {
			out.LatNS[k] = int64(d)
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Printf("READY %s\n", ln.Addr())
	<-ctx.Done()
	return nil
}

// readerChild is the bench's handle on the reader child.
type readerChild struct {
	proc *childProc
	hc   *http.Client
}

func startReader(s *session, ids []uint64) (*readerChild, error) {
	list := make([]string, len(ids))
	for k, id := range ids {
		list[k] = strconv.FormatUint(id, 10)
	}
	proc, err := startChild("reader", readerChildCommand, "-clickhouse-addr", s.ch.addr, "-database", benchDB,
		"-api", s.api.base, "-key", s.key, "-project", strconv.FormatUint(s.project, 10), "-ids", strings.Join(list, ","))
	if err != nil {
		return nil, err
	}
	return &readerChild{proc: proc, hc: &http.Client{}}, nil
}

func (r *readerChild) stop() {
	if err := r.proc.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: reader child:", err)
	}
}

// run is a namedOp's run for op ("raw-get", "api-get") measured in the
// reader child.
func (r *readerChild) run(op string) func(ctx context.Context, conc int, b budget, offset int) samples {
	return func(ctx context.Context, conc int, b budget, offset int) samples {
		q := url.Values{"op": {op}, "conc": {strconv.Itoa(conc)}, "n": {strconv.Itoa(b.N)},
			"offset": {strconv.Itoa(offset)}, "max": {b.Max.String()}}
		var rs remoteSamples
		err := func() error {
			req, err := http.NewRequestWithContext(ctx, "GET", r.proc.http+"/measure?"+q.Encode(), nil)
			if err != nil {
				return err
			}
			resp, err := r.hc.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("reader child: %s", resp.Status)
			}
			return json.NewDecoder(resp.Body).Decode(&rs)
		}()
		if err != nil {
			return samples{errs: 1, firstErr: err.Error()}
		}
		s := samples{errs: rs.Errs, firstErr: rs.FirstErr, elapsed: time.Duration(rs.ElapsedNS), lat: make([]time.Duration, len(rs.LatNS))}
		for k, d := range rs.LatNS {
			s.lat[k] = time.Duration(d)
		}
		return s
	}
}
