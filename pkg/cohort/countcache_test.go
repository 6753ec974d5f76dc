package cohort

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackgroundClose: Close cancels the running refreshes and returns only
// once they have ended (before the caller closes ClickHouse); no refresh
// starts after it.
func TestBackgroundClose(t *testing.T) {
	b := newBackground()
	var ended atomic.Bool
	running := make(chan struct{})
	if !b.start(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond)
		ended.Store(true)
	}) {
		t.Fatal("start refused before close")
	}
	<-running
	b.close()
	if !ended.Load() {
		t.Fatal("close returned while a refresh was running")
	}
	if b.start(func(context.Context) { t.Error("ran after close") }) {
		t.Fatal("start accepted after close")
	}
}

// TestCountCacheEntries: an entry keeps a digest of the definition, not
// the filters (up to 8 MiB each), and a deleted cohort's entry goes.
func TestCountCacheEntries(t *testing.T) {
	filters := func() json.RawMessage {
		return json.RawMessage(`{"properties":"` + strings.Repeat("x", 1<<20) + `"}`)
	}
	var cc countCache
	n := uint64(3)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for id := uint64(100); id < 116; id++ {
		cc.put(1, View{Cohort: Cohort{ID: id, Filters: filters()}, Count: &n, CalculatedAt: time.Now()})
	}
	if grown := int64(heap()) - int64(before); grown > 4<<20 {
		t.Fatalf("16 entries of 1 MiB definitions hold %d bytes", grown)
	}
	big := Cohort{ID: 7, Filters: filters()}
	cc.put(1, View{Cohort: big, Count: &n, CalculatedAt: time.Now()})
	if v, found, _ := cc.get(1, big, time.Now()); !found || *v.Count != 3 {
		t.Fatalf("get: %v %v", v, found)
	}
	changed := big
	changed.Filters = json.RawMessage(`{"properties":[]}`)
	if _, found, _ := cc.get(1, changed, time.Now()); found {
		t.Fatal("a changed definition found the old count")
	}
	cc.drop(1, 7)
	if _, found, _ := cc.get(1, big, time.Now()); found || len(cc.m) != 16 {
		t.Fatalf("after drop: %d entries", len(cc.m))
	}
}
