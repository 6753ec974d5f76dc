package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// GET person's SQL, copied verbatim from pkg/chstore/persons.go
// (getPerson) so the bare driver runs exactly what the store runs: GET
// person's baseline, and the list's (a page of the list should cost about
// what reading a person by key costs). Keep in step with that file.
const (
	sqlPersonColumns = "id, uuid, properties, distinct_ids, created_at, is_identified"
	sqlGetPerson     = "SELECT " + sqlPersonColumns + " FROM persons FINAL PREWHERE project_id = ? AND id = ? WHERE is_deleted = 0 ORDER BY id DESC LIMIT 1"
	// listFilter is the property filter of the filtered list runs.
	listFilter = `[{"key":"plan","value":"enterprise","operator":"exact","type":"person"}]`
)

// rawCtx carries the setting the store's reads carry.
func rawCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0}))
}

// rawKeyCtx carries the settings of the store's key reads (keyReadCtx in
// pkg/chstore/persons.go): GET person's baseline runs at the same
// ClickHouse priority as the store's GetPerson.
func rawKeyCtx(ctx context.Context) context.Context {
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_move_to_prewhere": 0, "priority": 1}))
}

// rawScan reads person rows as the bare driver gives them (no JSON
// decoding): what a client of ClickHouse pays at least.
func rawScan(rows driver.Rows) (int, error) {
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id uint64
		var u uuid.UUID
		var props string
		var ids []string
		var created time.Time
		var ident uint8
		if err := rows.Scan(&id, &u, &props, &ids, &created, &ident); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

func rawGetPerson(ctx context.Context, conn driver.Conn, project, id uint64) error {
	rows, err := conn.Query(rawKeyCtx(ctx), sqlGetPerson, project, id)
	if err != nil {
		return err
	}
	n, err := rawScan(rows)
	if err == nil && n != 1 {
		err = fmt.Errorf("person %d: %d rows", id, n)
	}
	return err
}

// apiServer is the HTTP API under test, in a child process of its own
// (apichild.go), as cmd/api runs it.
type apiServer struct {
	proc    *childProc // the child; its ops server serves profiles
	base    string
	key     string
	project uint64
	hc      *http.Client
}

func startAPI(s *session) (*apiServer, error) {
	proc, err := startChild("api", apiChildCommand, "-nats-url", s.n.url, "-clickhouse-addr", s.ch.addr, "-database", benchDB,
		"-consumer", s.cfg.Consumer)
	if err != nil {
		return nil, err
	}
	if len(proc.also) != 1 {
		_ = proc.stop()
		return nil, fmt.Errorf("api child: READY line without the API's address: %v", proc.also)
	}
	return &apiServer{proc: proc, base: "http://" + proc.also[0], key: s.key, project: s.project, hc: newAPIClient()}, nil
}

// newAPIClient is the HTTP client of the API's measurements: up to 64
// connections kept open, as many as the widest concurrency measured.
func newAPIClient() *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
}

func (a *apiServer) stop() {
	if err := a.proc.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: api child:", err)
	}
}

// cpuProfile profiles the API child until the returned function is
// called.
func (a *apiServer) cpuProfile(path string) func() {
	if err := a.proc.startCPUProfile(path); err != nil {
		return func() {}
	}
	return func() { _ = a.proc.stopCPUProfile() }
}

func (a *apiServer) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func (a *apiServer) get(ctx context.Context, path string) ([]byte, error) {
	status, body, err := a.do(ctx, "GET", path, nil)
	if err == nil && status != 200 {
		err = fmt.Errorf("GET %s: %d %s", path, status, body)
	}
	return body, err
}

func (a *apiServer) personPath(id uint64) string {
	return fmt.Sprintf("/api/projects/%d/persons/%d/", a.project, id)
}

// patchVisible measures person writes: PATCH a marker property, then GET
// until the person shows it. Latencies run from sending the PATCH.
func (a *apiServer) patchVisible(ctx context.Context, ids []uint64, n int, tag string) (patch, visible Latency, pending int, err error) {
	var pl, vl []time.Duration
	for i := 0; i < n; i++ {
		id := ids[i%len(ids)]
		mark := fmt.Sprintf("%s-%d", tag, i)
		body, _ := json.Marshal(map[string]any{"properties": map[string]any{"bench_mark": mark}})
		t0 := time.Now()
		status, resp, err := a.do(ctx, "PATCH", a.personPath(id), body)
		if err != nil {
			return patch, visible, pending, err
		}
		switch status {
		case 200:
		case 202:
			pending++
		default:
			return patch, visible, pending, fmt.Errorf("PATCH person %d: %d %s", id, status, resp)
		}
		pl = append(pl, time.Since(t0))
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := a.get(ctx, a.personPath(id))
			if err != nil {
				return patch, visible, pending, err
			}
			var p struct {
				Properties map[string]any `json:"properties"`
			}
			if json.Unmarshal(got, &p) == nil && p.Properties["bench_mark"] == mark {
				break
			}
			if time.Now().After(deadline) {
				return patch, visible, pending, fmt.Errorf("PATCH of person %d not visible after 60s", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
		vl = append(vl, time.Since(t0))
	}
	patch, visible = summarize(pl), summarize(vl)
	patch.Name, visible.Name = "PATCH returns", "PATCH then GET shows it"
	patch.Concurrency, visible.Concurrency = 1, 1
	return patch, visible, pending, nil
}
