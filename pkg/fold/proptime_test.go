package fold

import (
	"fmt"
	"math/rand"
	"testing"
)

// at is an event's timestamp s seconds after the epoch, so the moments the
// persons record (epoch milliseconds) read as s × 1000.
func at(s int) string { return fmt.Sprintf(`"timestamp":"1970-01-01T00:00:%02dZ"`, s) }

// The rules of timestamp-aware $set (docs/events.md, "Timestamp-aware
// $set"): event sequences, in log order, and the persons they leave, with
// the moments recorded (times=, absent when none).
var timeCases = []struct {
	name   string
	events []string
	want   []string
}{
	{"import out of order: the newest moment wins",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"new"}}`,
			`{"distinct_id":"a",` + at(3) + `,"properties":{"$set_timestamp":true},"$set":{"x":"old","y":"old"}}`},
		[]string{`[a] {"x":"new","y":"old"} times={"x":5000,"y":3000}`}},
	{"a newer import is applied",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true,"$set":{"x":1}}}`,
			`{"distinct_id":"a",` + at(7) + `,"properties":{"$set_timestamp":true,"$set":{"x":2}}}`},
		[]string{`[a] {"x":2} times={"x":7000}`}},
	{"equal moments: the later in the log wins",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":2}}`},
		[]string{`[a] {"x":2} times={"x":5000}`}},
	{"ordinary set on a person with moments records its timestamp; an older import is ignored",
		[]string{`{"distinct_id":"a",` + at(1) + `,"properties":{"$set_timestamp":true},"$set":{"y":1}}`,
			`{"distinct_id":"a",` + at(10) + `,"$set":{"x":"live"}}`,
			`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"import"}}`},
		[]string{`[a] {"x":"live","y":1} times={"x":10000,"y":1000}`}},
	{"ordinary set records its timestamp even when older than the recorded one",
		[]string{`{"distinct_id":"a",` + at(9) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(2) + `,"$set":{"x":2}}`,
			`{"distinct_id":"a",` + at(4) + `,"properties":{"$set_timestamp":true},"$set":{"x":3}}`},
		[]string{`[a] {"x":3} times={"x":4000}`}},
	{"a value set before any moment was recorded counts as the oldest",
		[]string{`{"distinct_id":"a",` + at(10) + `,"$set":{"x":"live"}}`,
			`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"import"}}`},
		[]string{`[a] {"x":"import"} times={"x":5000}`}},
	{"ordinary writes on a person without moments record nothing",
		[]string{`{"distinct_id":"a",` + at(10) + `,"$set":{"x":1},"$set_once":{"y":1}}`, `{"distinct_id":"a",` + at(5) + `,"$set":{"x":2}}`},
		[]string{`[a] {"x":2,"y":1}`}},
	{"an unchanged value still takes the newer moment",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(8) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(6) + `,"properties":{"$set_timestamp":true},"$set":{"x":2}}`},
		[]string{`[a] {"x":1} times={"x":8000}`}},
	{"unset removes the value and its moment",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":1,"y":1}}`,
			`{"distinct_id":"a",` + at(6) + `,"$unset":["x"]}`,
			`{"distinct_id":"a",` + at(3) + `,"properties":{"$set_timestamp":true},"$set":{"x":2,"y":2}}`},
		[]string{`[a] {"x":2,"y":1} times={"x":3000,"y":5000}`}},
	{"unset of the last key leaves no moments",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(6) + `,"properties":{"$unset":["x"]}}`, `{"distinct_id":"a",` + at(7) + `,"$set":{"z":1}}`},
		[]string{`[a] {"z":1}`}},
	{"set_once sets only an absent key, and records the moment",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set_once":{"s":1}}`,
			`{"distinct_id":"a",` + at(9) + `,"properties":{"$set_timestamp":true},"$set_once":{"s":2,"t":2}}`},
		[]string{`[a] {"s":1,"t":2} times={"s":5000,"t":9000}`}},
	{"an RFC 3339 $set_timestamp is the moment itself",
		[]string{`{"distinct_id":"a",` + at(20) + `,"properties":{"$set_timestamp":"1970-01-01T00:00:09.5Z"},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(30) + `,"properties":{"$set_timestamp":"1970-01-01T00:00:08Z"},"$set":{"x":2}}`,
			`{"distinct_id":"a",` + at(10) + `,"properties":{"$set_timestamp":true},"$set":{"x":3}}`},
		[]string{`[a] {"x":3} times={"x":10000}`}},
	{"other $set_timestamp values make the event ordinary",
		[]string{`{"distinct_id":"a",` + at(9) + `,"properties":{"$set_timestamp":false},"$set":{"x":1}}`,
			`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":"yesterday"},"$set":{"x":2}}`,
			`{"distinct_id":"a",` + at(4) + `,"properties":{"$set_timestamp":1},"$set":{"x":3}}`},
		[]string{`[a] {"x":3}`}},
	{"merge keeps for each kept value its moment",
		[]string{`{"distinct_id":"anon",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"anon","a":1}}`,
			`{"distinct_id":"user",` + at(3) + `,"properties":{"$set_timestamp":true},"$set":{"x":"user"}}`,
			`{"event":"$identify","distinct_id":"user",` + at(20) + `,"properties":{"$anon_distinct_id":"anon"}}`,
			`{"distinct_id":"user",` + at(4) + `,"properties":{"$set_timestamp":true},"$set":{"x":"late","a":2}}`},
		[]string{`[anon user] {"a":1,"x":"late"} identified times={"a":5000,"x":4000}`}},
	{"merge: a kept value without a moment has none",
		[]string{`{"distinct_id":"anon",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"anon"}}`,
			`{"distinct_id":"user",` + at(9) + `,"$set":{"x":"user"}}`,
			`{"event":"$merge_dangerously","distinct_id":"user",` + at(20) + `,"properties":{"alias":"anon"}}`},
		[]string{`[anon user] {"x":"user"} identified`}},
	{"merge with a set in the merging event",
		[]string{`{"distinct_id":"anon",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":"anon"}}`,
			`{"distinct_id":"user",` + at(6) + `,"$set":{"y":1}}`,
			`{"event":"$identify","distinct_id":"user",` + at(4) + `,"properties":{"$anon_distinct_id":"anon","$set_timestamp":true},"$set":{"x":"identify","y":2}}`},
		[]string{`[anon user] {"x":"anon","y":2} identified times={"x":5000,"y":4000}`}},
	{"split persons start without moments",
		[]string{`{"distinct_id":"a",` + at(5) + `,"properties":{"$set_timestamp":true},"$set":{"x":1}}`,
			`{"event":"$identify","distinct_id":"b",` + at(6) + `,"properties":{"$anon_distinct_id":"a"}}`,
			`{"event":"$split_person","distinct_id":"b",` + at(7) + `,"properties":{"$person_id":1,"$split_distinct_ids":["a"]}}`,
			`{"distinct_id":"a",` + at(1) + `,"properties":{"$set_timestamp":true},"$set":{"x":2}}`},
		[]string{`[a] {"x":2} times={"x":1000}`, `[b] {"x":1} identified times={"x":5000}`}},
}

func TestTimestampRules(t *testing.T) {
	for _, tc := range timeCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 2, 100} {
				got := run(t, tc.events, size).snapshot(1)
				if joinLines(got) != joinLines(tc.want) {
					t.Errorf("batch size %d:\n got %q\nwant %q", size, got, tc.want)
				}
			}
		})
	}
}

// timedEvents is randomEvents with timestamp-aware writes mixed in, their
// moments out of log order.
func timedEvents(seed int64, n, ids int) []string {
	r := rand.New(rand.NewSource(seed))
	out := randomEvents(seed, n, ids)
	for i := range out {
		if r.Intn(3) == 0 {
			out[i] = fmt.Sprintf(`{"distinct_id":"d%d",%s,"properties":{"$set_timestamp":true},"$set":{"k%d":%d}}`, r.Intn(ids), at(r.Intn(60)), r.Intn(5), i)
		}
	}
	return out
}

// TestTimestampRulesReplay: with timestamp-aware writes, batch sizes and
// crashes part way through a batch's writes still give the same rows as
// an uninterrupted run (the moments are part of the person rows).
func TestTimestampRulesReplay(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		events := timedEvents(seed, 300, 25)
		ref := run(t, events, 40)
		if got, want := run(t, events, 1).rows(), ref.rows(); got != want {
			t.Fatalf("seed %d: one at a time differs:\n%s\nwant\n%s", seed, got, want)
		}
		for _, cut := range writeCuts {
			store := foldCrashed(t, events, 120, 160, cut.write, 13)
			if got, want := store.rows(), ref.rows(); got != want {
				t.Fatalf("seed %d, cut %q: rows differ:\n%s\nwant\n%s", seed, cut.name, got, want)
			}
		}
	}
}
