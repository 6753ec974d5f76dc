package httpapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
)

// Plugin code of the tests: a source plugin that tags events and sets a
// person property, and one that throws or loops on some events.
const (
	taggerTS = `export function processEvent(event: any, { config }: any) {
  event.properties.tag = config.tag
  event.$set = { ...(event.$set || {}), tagged: config.tag }
  return event
}`
	badTS = `export function processEvent(event: any) {
  if (event.event === 'boom') throw new Error('boom')
  if (event.event === 'loop') { while (true) {} }
  return event
}`
)

// TestTransformationsOnIngest: plugins of the shipped repository (drop
// events, rename property) and source plugins, enabled through the API,
// transform the events captured through /batch/ after the change, in
// order; a failing and a looping plugin are counted and block nothing;
// and a replay into an empty database after a config change gives the
// same events and persons.
func TestTransformationsOnIngest(t *testing.T) {
	e := newTransformEnv(t)
	reg, stop := e.runIngester(e.store, "ingester")
	ev := func(name, id, props string) string {
		return fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, id, props)
	}
	e.capture(ev("pageview", "u1", `{"old":1}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)

	drop, _ := e.install("https://github.com/personhub/plugin-drop-events", "", 1, `{"events":"junk, spam"}`)
	// Two configs of the shipped rename plugin: the one created first has
	// the higher order, so "newer" appears only if steps run by order,
	// not by id.
	_, renamePlugin := e.install("https://github.com/personhub/plugin-property-rename", "", 5, `{"from":"new","to":"newer"}`)
	rename := uint64(e.call(201, "POST", fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA.ID),
		fmt.Sprintf(`{"plugin":%d,"enabled":true,"order":2,"config":{"from":"old","to":"new"}}`, renamePlugin))["id"].(float64))
	tagger, taggerPlugin := e.install("", taggerTS, 3, `{"tag":"x"}`)
	bad, _ := e.install("", badTS, 4, `{}`)
	e.capture(ev("junk", "u1", `{"old":2}`), ev("pageview", "u1", `{"old":3}`), ev("boom", "u2", `{"old":4}`),
		ev("loop", "u2", `{"old":5}`), ev("spam", "u3", `{}`), ev("signup", "u2", `{"keep":6}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)

	got := storedEvents(t, e.store, e.projectA.ID)
	want := []string{
		`pageview u1 {"old":1}`,
		`pageview u1 {"$set":{"tagged":"x"},"newer":3,"tag":"x"}`,
		`boom u2 {"$set":{"tagged":"x"},"newer":4,"tag":"x"}`,
		`loop u2 {"$set":{"tagged":"x"},"newer":5,"tag":"x"}`,
		`signup u2 {"$set":{"tagged":"x"},"keep":6,"tag":"x"}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	persons := storedPersons(t, e.store, e.projectA.ID)
	if want := []string{`u1 {"tagged":"x"}`, `u2 {"tagged":"x"}`}; !slices.Equal(persons, want) {
		t.Fatalf("persons %v, want %v (u3's only event was dropped)", persons, want)
	}
	id := func(c uint64) string { return fmt.Sprint(c) }
	for _, c := range []struct {
		config  uint64
		outcome string
		n       float64
	}{{drop, "dropped", 2}, {drop, "ok", 4}, {rename, "ok", 4}, {tagger, "ok", 4}, {bad, "failed", 2}, {bad, "ok", 2}} {
		if n := counter(t, reg, "transformation_events_total", map[string]string{"plugin_config_id": id(c.config), "outcome": c.outcome}); n != c.n {
			t.Errorf("config %d %s: %v, want %v", c.config, c.outcome, n, c.n)
		}
	}

	// The loop's timeout, a fact of this run, is recorded; the throw is
	// not (the event decides it).
	if n := counter(t, reg, "transformation_outcomes_recorded_total", map[string]string{"kind": "failure"}); n != 1 {
		t.Errorf("interruptions recorded: %v, want 1", n)
	}
	// The same counts in the config JSON (written by the ingester).
	cfgPath := func(c uint64) string { return fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, c) }
	m := e.call(200, "GET", cfgPath(bad), "")["metrics"].(map[string]any)
	if m["events_in"] != 4.0 || m["events_failed"] != 2.0 || m["events_dropped"] != 0.0 || m["time_ms"].(float64) < 100 {
		t.Errorf("bad plugin's metrics %v (the loop alone took 100 ms)", m)
	}
	m = e.call(200, "GET", cfgPath(drop), "")["metrics"].(map[string]any)
	if m["events_in"] != 6.0 || m["events_dropped"] != 2.0 || m["events_failed"] != 0.0 {
		t.Errorf("drop plugin's metrics %v", m)
	}

	// A config change, then more events: they get the new config; the
	// earlier ones keep the old one on a replay.
	e.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, rename), `{"config":{"from":"keep","to":"kept"}}`)
	e.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, drop), `{"enabled":false}`)
	e.capture(ev("junk", "u4", `{"old":7,"keep":8}`))
	// New code of a plugin (update_source) applies to the events after it.
	e.call(200, "PATCH", fmt.Sprintf("/api/organizations/@current/pipeline_transformations/%d/update_source/", taggerPlugin),
		`{"index.ts":"export function processEvent(event: any, { config }: any) { event.properties.tag = 'v2-' + config.tag; return event }"}`)
	e.capture(ev("later", "u4", `{}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	stop()
	// A restart resumes with the chain as of its commit point (every
	// command is below it: the chains come from the ingester's record).
	_, stop = e.runIngester(e.store, "ingester")
	e.capture(ev("restarted", "u4", `{"old":9}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	stop()
	first := storedEvents(t, e.store, e.projectA.ID)
	if last := first[len(first)-3:]; last[0] != `junk u4 {"$set":{"tagged":"x"},"kept":8,"old":7,"tag":"x"}` || last[1] != `later u4 {"tag":"v2-x"}` ||
		last[2] != `restarted u4 {"old":9,"tag":"v2-x"}` {
		t.Fatalf("after the changes and a restart: %s", strings.Join(last, "\n"))
	}

	// Replay: a new database, a new process, the same log.
	replayStore := testenv.ClickHouse(t)
	reg2, _ := e.runIngester(replayStore, "replay")
	start := time.Now()
	testenv.WaitCommitted(t, replayStore, "replay", e.lastSeq(), 30*time.Second)
	if again := storedEvents(t, replayStore, e.projectA.ID); !slices.Equal(again, first) {
		t.Fatalf("replay events:\n%s\nfirst run:\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}
	if again, before := storedPersons(t, replayStore, e.projectA.ID), storedPersons(t, e.store, e.projectA.ID); !slices.Equal(again, before) {
		t.Fatalf("replay persons %v, first run %v", again, before)
	}
	// The loop's timeout was recorded: the replay applies it without
	// running the loop again.
	if n := counter(t, reg2, "transformation_events_total", map[string]string{"plugin_config_id": id(bad), "outcome": "failed"}); n != 2 {
		t.Errorf("replay failures of the bad plugin: %v, want 2", n)
	}
	if n := counter(t, reg2, "transformation_outcomes_recorded_total", map[string]string{"kind": "failure"}); n != 0 {
		t.Errorf("the replay recorded %v interruptions, want none", n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("replay took %s", took)
	}
}
