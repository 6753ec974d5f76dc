package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/capture"
)

// TestSlowBodiesDoNotStarveOthers: connections trickling a /batch/ body
// (one byte per 200ms) are cut by the read timeout; large ones hold at
// most BodyConcurrency body slots, the other large ones wait at most
// BodyWait and get a 503 with Retry-After; everyone else (reads, small
// bodies) is served promptly meanwhile.
func TestSlowBodiesDoNotStarveOthers(t *testing.T) {
	settings := Settings{ReadHeaderTimeout: time.Second, ReadTimeout: 1500 * time.Millisecond, WriteTimeout: 5 * time.Second,
		IdleTimeout: 5 * time.Second, BodyConcurrency: 4, BodyWait: 300 * time.Millisecond}
	f := newFullAPIServer(t, Config{}, capture.Config{}, &settings)
	seed(f.env)
	addr := f.srv.Listener.Addr().String()
	const slow = 40
	type outcome struct {
		status  int // 0: the connection was closed without an answer
		elapsed time.Duration
	}
	results := make(chan outcome, slow)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range slow {
		length := 1000 // small: no slot
		if i%2 == 1 {
			length = 1 << 20
		}
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprintf(conn, "POST /batch/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", length)
		wg.Add(1)
		go func() { // trickle
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		go func() {
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			o := outcome{elapsed: time.Since(start)}
			if err == nil {
				o.status = res.StatusCode
				if (o.status == 503) != (res.Header.Get("Retry-After") != "") {
					o.status = -o.status // a 503 without Retry-After
				}
			}
			results <- o
		}()
	}
	time.Sleep(400 * time.Millisecond)

	// Everyone else: a read, health, and a complete small body.
	for _, path := range []string{fmt.Sprintf("/api/projects/%d/persons/", f.projectA.ID), "/healthz"} {
		start := time.Now()
		if r := f.get(f.keyAll, path); r.status != 200 || time.Since(start) > time.Second {
			t.Fatalf("%s during the slow bodies: %d after %v", path, r.status, time.Since(start))
		}
	}
	start := time.Now()
	r := request(t, "POST", f.url+"/batch/", "", `{"api_key":"`+f.projectA.APIToken+`","batch":[{"event":"e","distinct_id":"d"}]}`)
	if r.status != 200 || time.Since(start) > time.Second {
		t.Fatalf("small body during the slow ones: %d after %v: %s", r.status, time.Since(start), r.body)
	}

	counts := map[int]int{}
	limit := settings.ReadTimeout + 1500*time.Millisecond
	for range slow {
		select {
		case o := <-results:
			if o.elapsed > limit {
				t.Errorf("a slow body was held %v", o.elapsed)
			}
			counts[o.status]++
		case <-time.After(limit + time.Second):
			t.Fatalf("slow connections still open after %v: %v", limit+time.Second, counts)
		}
	}
	for status := range counts {
		if status != 408 && status != 503 && status != 0 {
			t.Fatalf("slow bodies answered %v", counts)
		}
	}
	if counts[408] != slow/2+settings.BodyConcurrency || counts[503] != slow/2-settings.BodyConcurrency {
		t.Fatalf("slots: %v", counts)
	}
	t.Logf("%d slow bodies: %v (status: count) within %v; others served promptly", slow, counts, limit)
	close(stop)
	wg.Wait()
}
