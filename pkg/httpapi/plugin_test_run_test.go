package httpapi

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
)

// sourcePlugin creates a source plugin with the given entry file and
// returns its id.
func (e *pluginEnv) sourcePlugin(name, index string) any {
	e.t.Helper()
	p := e.install(e.keyA, e.orgA, `{"plugin_type":"source","name":"`+name+`"}`)
	body, _ := json.Marshal(map[string]string{"index.ts": index})
	e.ok(200, "PATCH", e.keyA, e.pt(e.orgA, fmt.Sprint(p["id"])+"/update_source/"), string(body))
	return p["id"]
}

func shippedPlugin(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../plugin/repository/builtin/github/personhub/" + name + "/v1.0.0/index.ts")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPluginConfigDryRun: POST plugin_configs/{id}/test/ runs the
// project's chain (enabled configs in order, plus {id} though disabled)
// on a sample event and answers each step; nothing is stored.
func TestPluginConfigDryRun(t *testing.T) {
	e := newPluginEnv(t)
	drop := e.sourcePlugin("drop", shippedPlugin(t, "plugin-drop-events"))
	rename := e.sourcePlugin("rename", shippedPlugin(t, "plugin-property-rename"))
	thrower := e.sourcePlugin("thrower", `export function processEvent(e, {config}) { throw new Error("bad " + e.event) }`)
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	// Rename is created first but ordered after drop.
	e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%v,"enabled":true,"order":2,"config":{"from":"old","to":"new"}}`, rename))
	d := e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%v,"enabled":true,"order":1,"config":{"events":"junk"}}`, drop))
	th := e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%v,"enabled":false,"order":3}`, thrower))
	// A config of another project: its chain is not this one.
	e.ok(201, "POST", e.keyA, fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA2), fmt.Sprintf(`{"plugin":%v,"enabled":true}`, thrower))

	test := func(id any) string { return fmt.Sprintf("%s%v/test/", cfgs, id) }
	got := e.ok(200, "POST", e.keyA, test(d["id"]), `{"event":"pageview","distinct_id":"u1","team_id":999,"properties":{"old":1}}`)
	ev := got["event"].(map[string]any)
	if got["dropped"] != false || ev["team_id"] != float64(e.projectA) || pluginJSONText(ev["properties"]) != `{"new":1}` {
		t.Fatalf("dry run: %v", got)
	}
	steps := got["steps"].([]any)
	if len(steps) != 2 || steps[0].(map[string]any)["plugin_id"] != drop || steps[1].(map[string]any)["outcome"] != "ok" {
		t.Fatalf("steps: %v", steps)
	}
	// The disabled thrower joins when it is the one tested: it fails, and
	// the event goes on as the step before gave it.
	got = e.ok(200, "POST", e.keyA, test(th["id"]), `{"event":"pageview","properties":{"old":1}}`)
	steps = got["steps"].([]any)
	last := steps[2].(map[string]any)
	if len(steps) != 3 || last["outcome"] != "failed" || last["error"] == "" || pluginJSONText(got["event"].(map[string]any)["properties"]) != `{"new":1}` {
		t.Fatalf("thrower: %v", got)
	}
	got = e.ok(200, "POST", e.keyA, test(d["id"]), `{"event":"junk"}`)
	steps = got["steps"].([]any)
	if got["dropped"] != true || got["event"] != nil || steps[0].(map[string]any)["outcome"] != "dropped" || steps[1].(map[string]any)["outcome"] != "skipped" {
		t.Fatalf("drop: %v", got)
	}
	// Bad samples: 400 with attr; unknown or other project's config: 404.
	e.wantErr(e.call("POST", e.keyA, test(d["id"]), `{"distinct_id":"x"}`), 400, "event", "event")
	e.wantErr(e.call("POST", e.keyA, test(d["id"]), `{"event":"x","uuid":"nope"}`), 400, "uuid", "uuid")
	e.wantErr(e.call("POST", e.keyA, test(d["id"]), `[1]`), 400, "", "event")
	wantError(t, e.call("POST", e.keyA, test(999), `{"event":"x"}`), 404, "invalid_request", "not_found")
	wantError(t, e.call("POST", e.keyB, fmt.Sprintf("/api/projects/%d/plugin_configs/%v/test/", e.projectB, d["id"]), `{"event":"x"}`), 404, "invalid_request", "not_found")
}

// TestPluginConfigDryRunBusy: dry runs beyond the runtime's two at once
// are refused with a 503 and Retry-After at once, never queued. The chain
// holds five looping steps, so each run holds its slot for about 500 ms
// (five 100 ms time limits) while eight requests arrive together.
func TestPluginConfigDryRunBusy(t *testing.T) {
	e := newPluginEnv(t)
	loop := e.sourcePlugin("loop", `export function processEvent(e) { for (;;) {} }`)
	cfgs := fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA)
	var id any
	for i := 0; i < 5; i++ {
		id = e.ok(201, "POST", e.keyA, cfgs, fmt.Sprintf(`{"plugin":%v,"enabled":true,"order":%d}`, loop, i))["id"]
	}
	path := fmt.Sprintf("%s%v/test/", cfgs, id)
	var wg sync.WaitGroup
	answers := make([]response, 8)
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = request(t, "POST", e.url+path, e.keyA, `{"event":"x"}`) }()
	}
	wg.Wait()
	ok, busy := 0, 0
	for _, r := range answers {
		switch r.status {
		case 200:
			ok++
		case 503:
			busy++
			if r.header.Get("Retry-After") != "1" {
				t.Fatalf("503 without Retry-After 1: %v", r.header)
			}
			wantError(t, r, 503, "server_error", "unavailable")
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if ok == 0 || busy == 0 {
		t.Fatalf("%d answered, %d refused", ok, busy)
	}
	// Once the runs are over, dry runs are served again.
	e.ok(200, "POST", e.keyA, path, `{"event":"x"}`)
}
