package ingest

import (
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// TestStopDuringStartIsClean: a stop asked for at any moment of the start
// (binding the streams, the lease, recovery, the write lane, the
// consumer) ends Run without an error. A stop is not a failure: the
// composition root and the tests treat Run's error as one (CI once failed
// on a bare "context canceled" from a stop during the start).
func TestStopDuringStartIsClean(t *testing.T) {
	n := testenv.StartNATS(t, "")
	store := testenv.ClickHouse(t)
	publish(t, n.JS, 7, []string{`{"event":"$pageview","distinct_id":"a","$set":{"n":1}}`})
	for k := 0; k < 40; k++ {
		cancel, done := startIngester(t, testConfig("ingester"), n.JS, store)
		time.Sleep(time.Duration(k) * 2 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("stop after %v: %v", time.Duration(k)*2*time.Millisecond, err)
		}
	}
}
