package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/chstore"
	"github.com/personhub/personhub/pkg/stream"
)

// TestPersonValuesUnderWrites interleaves values/ reads with a steady
// stream of captured $set and $unset events (new persons too), as a
// client would see them: every answer must be the straightforward count
// (distinct live persons per value, in Go) as of some point of the log
// between the watermark the API had before the request and the last
// event published after the answer; once the writes stop and are folded,
// exactly the final count, as the direct query gives it.
func TestPersonValuesUnderWrites(t *testing.T) {
	e := newEnv(t)
	e.startIngester()
	project := e.projectA.ID
	rng := rand.New(rand.NewPCG(10, 23))
	plans := []string{"free", "pro", "team", "enterprise", ""}

	// change is one published event: the person's (distinct id's) plan
	// from seq on; unset removes it.
	type change struct {
		seq   uint64
		id    string
		plan  string
		unset bool
	}
	var (
		mu  sync.Mutex // held across a publish and its record
		log []change
	)
	publish := func(id, plan string, unset bool) error {
		body := fmt.Sprintf(`{"event":"e","distinct_id":%q,"$set":{"plan":%q}}`, id, plan)
		if unset {
			body = fmt.Sprintf(`{"event":"e","distinct_id":%q,"$unset":["plan"]}`, id)
		}
		mu.Lock()
		defer mu.Unlock()
		u := uuid.NewString()
		ack, err := stream.Publish(context.Background(), e.nats.JS, project, u,
			[]byte(fmt.Sprintf(`{"uuid":%q,"timestamp":%q,%s`, u, time.Now().UTC().Format(time.RFC3339), body[1:])))
		if err != nil {
			return err
		}
		log = append(log, change{ack.Sequence, id, plan, unset})
		return nil
	}
	ids := []string{}
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("p%d", i))
		if err := publish(ids[i], plans[rng.IntN(len(plans))], false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.waitSeq(log[len(log)-1].seq); err != nil {
		t.Fatal(err)
	}

	// count is the straightforward count of the plans as of the changes.
	count := func(changes []change) []chstore.PropertyValue {
		plan := map[string]*string{}
		for _, c := range changes {
			if c.unset {
				plan[c.id] = nil
			} else {
				plan[c.id] = &c.plan
			}
		}
		n := map[string]uint64{}
		for _, p := range plan {
			if p != nil && *p != "" {
				n[*p]++
			}
		}
		out := []chstore.PropertyValue{}
		for v, c := range n {
			out = append(out, chstore.PropertyValue{Name: v, Count: c})
		}
		slices.SortFunc(out, func(a, b chstore.PropertyValue) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Name, b.Name))
		})
		return out
	}
	values := func() []chstore.PropertyValue {
		r := e.get(e.keyAll, fmt.Sprintf("/api/projects/%d/persons/values/?key=plan", project))
		if r.status != 200 {
			t.Fatalf("values: %d %s", r.status, r.body)
		}
		var out []chstore.PropertyValue
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("values: %s", r.body)
		}
		return out
	}

	// The writer: one event every 3 ms, a new person one time in eight.
	done, stop := make(chan struct{}), make(chan struct{})
	var writeErr error
	go func() {
		defer close(done)
		wr := rand.New(rand.NewPCG(7, 7))
		for i := range 300 {
			id := ids[wr.IntN(len(ids))]
			if wr.IntN(8) == 0 {
				id = fmt.Sprintf("q%d", i)
			}
			if writeErr = publish(id, plans[wr.IntN(len(plans))], wr.IntN(6) == 0); writeErr != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
		}
	}()
	// Before the environment's cleanups (last registered, first run).
	t.Cleanup(func() { close(stop); <-done })
	reads := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		from := e.progress.Of(project).Seq()
		got := values()
		mu.Lock()
		changes := slices.Clone(log)
		mu.Unlock()
		// The answer is the count as of a point between from and the
		// last change published: the changes up to one whose next is
		// above from (or the last).
		ok := false
		for i := range changes {
			if (i == len(changes)-1 || changes[i+1].seq > from) && slices.Equal(got, count(changes[:i+1])) {
				ok = true
				break
			}
		}
		if !ok {
			t.Fatalf("read %d: values %v are no count as of the log from seq %d (%d changes; final count %v)",
				reads, got, from, len(changes), count(changes))
		}
		reads++
	}
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	last := log[len(log)-1]
	if err := e.waitSeq(last.seq); err != nil {
		t.Fatal(err)
	}
	if err := e.progress.Wait(context.Background(), project, last.seq, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	want := count(log)
	direct, err := e.store.PropertyValues(context.Background(), project, "plan", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := values(); !slices.Equal(got, want) || !slices.Equal(direct, want) {
		t.Fatalf("after the writes: values %v, direct query %v, want %v", got, direct, want)
	}
	if reads < 20 {
		t.Fatalf("only %d reads during the writes", reads)
	}
	t.Logf("%d reads during %d writes", reads, len(log)-40)
}
