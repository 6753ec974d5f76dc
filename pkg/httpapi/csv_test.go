package httpapi

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/csvexport"
)

// seedPersons writes n persons straight into the persons table (the ingester
// would take minutes for an export-sized population; the export reads the
// table, which is what is under test). Each has an email and a bio of
// bioLen bytes.
func (e *env) seedPersons(n, bioLen int) {
	e.t.Helper()
	bio := strings.Repeat("b", bioLen)
	err := e.store.Conn().Exec(context.Background(), `
		INSERT INTO persons (project_id, id, uuid, properties, property_keys, property_values,
		                     distinct_ids, created_at, is_identified, is_deleted, version)
		SELECT ?, number + 1, toUUID('0191f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00'),
		       concat('{"bio":"', ?, '","email":"p', toString(number), '@x.io"}'),
		       ['bio', 'email'], [?, concat('p', toString(number), '@x.io')],
		       [concat('d', toString(number))], toDateTime(1700000000 + number), 0, 0, 1
		FROM system.numbers LIMIT ?`, e.projectA.ID, bio, bio, n)
	if err != nil {
		e.t.Fatal(err)
	}
}

// spillFiles lists this process's open files that are csvexport spill files.
func spillFiles(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(l, "csvexport-") {
			out = append(out, l)
		}
	}
	return out
}

func (e *env) openCSV(path string) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.keyAll)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	// Closed before the server is (cleanups run last first), which would
	// otherwise wait for a handler blocked on an unread body.
	e.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/csv; charset=utf-8" {
		body, _ := io.ReadAll(res.Body)
		e.t.Fatalf("%d %s: %s", res.StatusCode, res.Header, body)
	}
	return res
}

// A whole-project export streams: the API's live heap stays within a bound
// while 50k persons (about 25 MB of CSV) go out, the rows pass through a
// spill file, and the file is released at the end.
func TestCSVExportStreamsWithBoundedMemory(t *testing.T) {
	const persons = 50_000
	e := newEnv(t)
	e.seedPersons(persons, 400)
	path := fmt.Sprintf("/api/projects/%d/persons/?format=csv", e.projectA.ID)

	// A low GC target keeps HeapAlloc close to the live heap, so sampling
	// it measures what the export holds.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
		}
	})

	res := e.openCSV(path)
	r := csv.NewReader(res.Body)
	r.ReuseRecord = true
	rec, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	header := strings.Join(rec, ",")
	if got := spillFiles(t); len(got) == 0 {
		t.Error("no spill file open while the export streams")
	}
	n := 0
	for ; ; n++ {
		if _, err = r.Read(); err != nil {
			break
		}
	}
	res.Body.Close()
	close(stop)
	wg.Wait()
	if !errors.Is(err, io.EOF) || n != persons {
		t.Fatalf("read %d rows (%v), want %d", n, err, persons)
	}
	// last_seen_at is empty: the persons are written without events.
	if header != "created_at,distinct_ids.0,id,is_identified,last_seen_at,name,properties.bio,properties.email,uuid" {
		t.Fatalf("header %s", header)
	}
	const bound = 16 << 20
	if peak > base && peak-base > bound {
		t.Fatalf("heap grew by %d MiB during the export (bound %d MiB)", (peak-base)>>20, bound>>20)
	}
	t.Logf("heap growth during the export: %d KiB", (int64(peak)-int64(base))>>10)
	waitNoSpill(t)
}

// A client that goes away mid-export releases the spill file.
func TestCSVExportClientDisconnect(t *testing.T) {
	e := newEnv(t)
	e.seedPersons(50_000, 400)
	res := e.openCSV(fmt.Sprintf("/api/projects/%d/persons/?format=csv", e.projectA.ID))
	if _, err := io.CopyN(io.Discard, res.Body, 64<<10); err != nil {
		t.Fatal(err)
	}
	if len(spillFiles(t)) == 0 {
		t.Fatal("no spill file open while the export streams")
	}
	res.Body.Close() // the connection closes with most of the body unread
	waitNoSpill(t)
}

func waitNoSpill(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(spillFiles(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spill files still open: %v", spillFiles(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An export wider than the column cap is refused before anything is sent.
func TestCSVExportColumnCap(t *testing.T) {
	e := newEnv(t)
	// One distinct property per person: the header would be the union.
	err := e.store.Conn().Exec(context.Background(), `
		INSERT INTO persons (project_id, id, uuid, properties, property_keys, property_values,
		                     distinct_ids, created_at, is_identified, is_deleted, version)
		SELECT ?, number + 1, toUUID('0191f1d4-7b6c-7c3a-9a51-1d2d8b7e6f00'),
		       concat('{"k', toString(number), '":1}'), [concat('k', toString(number))], ['1'],
		       [concat('d', toString(number))], toDateTime(1700000000 + number), 0, 0, 1
		FROM system.numbers LIMIT ?`, e.projectA.ID, csvexport.DefaultMaxColumns)
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/projects/%d/persons/?format=csv", e.projectA.ID)
	m := wantError(t, e.get(e.keyAll, path), 400, "validation_error", "invalid_input")
	if m["attr"] != "format" {
		t.Fatalf("attr %v", m["attr"])
	}
	// Narrowed below the cap, it is served.
	r := e.get(e.keyAll, path+"&limit=100")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
