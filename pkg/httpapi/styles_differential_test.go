package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/personhub/personhub/pkg/capture"
	"github.com/personhub/personhub/pkg/command"
	"github.com/personhub/personhub/pkg/controlplane"
	"github.com/personhub/personhub/pkg/stream"
	"github.com/personhub/personhub/pkg/testenv/jsonstyle"
)

// TestStylesGiveTheSameAnswers: one history sent in every way a client
// may write its JSON (compact; Python's json.dumps; indented; a space
// before the colon; keys written with escapes; strings with PHP's and
// Go's escapes), through capture, straight to JetStream and through
// `ingester publish`, each into a project of its own, gives the same
// answers on the persons list and every analysis route: the events table
// keeps one canonical text of the properties, which visitParam* read
// (docs/events.md, "Stored properties").
func TestStylesGiveTheSameAnswers(t *testing.T) {
	python := pythonJSON(t)
	c := newCaptureEnv(t, capture.Config{})
	ctx := context.Background()
	history := styleHistory()

	type variant struct {
		name string
		send func(p controlplane.Project)
	}
	batch := func(p controlplane.Project) []byte {
		return marshalJS(t, map[string]any{"api_key": p.APIToken, "batch": history})
	}
	post := func(name string, p controlplane.Project, body []byte) {
		if r := c.post("/batch/", http.Header{"Content-Type": {"application/json"}}, string(body)); r.status != 200 {
			t.Fatalf("%s: /batch/ answered %d: %s", name, r.status, r.body)
		}
	}
	// envelopes are the history as the stream's envelopes, one a line.
	envelopes := func(name string) []byte {
		var lines bytes.Buffer
		for i, ev := range history {
			env := map[string]any{"uuid": uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "%s/%d", name, i)).String()}
			for k, v := range ev {
				env[k] = v
			}
			lines.Write(marshalJS(t, env))
		}
		return lines.Bytes()
	}
	var variants []variant
	for _, s := range jsonstyle.All {
		variants = append(variants, variant{"capture " + s.Name, func(p controlplane.Project) { post(s.Name, p, s.Write(batch(p))) }})
	}
	variants = append(variants,
		variant{"capture python json.dumps", func(p controlplane.Project) { post("python", p, python(t, batch(p))) }},
		variant{"JetStream python json.dumps", func(p controlplane.Project) {
			for _, line := range bytes.Split(bytes.TrimSpace(python(t, envelopes("jetstream"))), []byte("\n")) {
				var env struct{ UUID string }
				if err := json.Unmarshal(line, &env); err != nil {
					t.Fatal(err)
				}
				if _, err := stream.Publish(ctx, c.nats.JS, p.ID, env.UUID, line); err != nil {
					t.Fatal(err)
				}
			}
		}},
		variant{"ingester publish, escaped keys", func(p controlplane.Project) {
			var lines bytes.Buffer
			for _, line := range bytes.Split(bytes.TrimSpace(envelopes("publish")), []byte("\n")) {
				lines.Write(jsonstyle.ByName("escaped-keys").Write(line))
				lines.WriteByte('\n')
			}
			if n, err := command.PublishLines(ctx, c.nats.JS, p.ID, &lines, 100); err != nil || n != len(history) {
				t.Fatalf("published %d of %d: %v", n, len(history), err)
			}
		}},
	)

	projects := make([]controlplane.Project, len(variants))
	for i, v := range variants {
		p, err := c.cp.CreateProject(ctx, c.projectA.OrganizationID, v.name)
		if err != nil {
			t.Fatal(err)
		}
		projects[i] = p
		v.send(p)
	}
	c.startIngester()
	s, err := c.nats.JS.Stream(ctx, stream.Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.waitSeq(info.State.LastSeq); err != nil {
		t.Fatal(err)
	}

	for _, q := range styleQueries() {
		var want string
		for i, v := range variants {
			got := c.styleAnswer(t, projects[i].ID, q)
			if i == 0 {
				if want = got; strings.Contains(want, `"count":0`) || !strings.Contains(want, `"distinct_ids"`) && !strings.Contains(want, `"count"`) {
					t.Errorf("%s: the compact history answers nobody, so it tells nothing: %s", q, want)
				}
				continue
			}
			if got != want {
				t.Errorf("%s, %s:\n got %s\nwant %s (compact)", v.name, q, got, want)
			}
		}
	}
}

// marshalJS writes v as JavaScript's JSON.stringify would (as the
// browser library sends it): compact, without Go's escapes of <, >, &,
// U+2028 and U+2029. It ends with a newline.
func marshalJS(t *testing.T, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(bytes.ReplaceAll(b.Bytes(), []byte(`\u2028`), []byte("\u2028")), []byte(`\u2029`), []byte("\u2029"))
}

// styleHistory is six persons' events over two days: browsers, URLs with
// slashes and query strings, a screen, purchases with amounts, strings
// that need escapes or are not ASCII, person properties set at the top
// level and inside properties, and an anonymous id merged by $identify.
func styleHistory() []map[string]any {
	day := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	browsers := []string{"Chrome", "Firefox", "Chrome", "Safari", "Chrome", "Firefox"}
	var evs []map[string]any
	add := func(name, id string, at time.Time, props map[string]any, extra ...any) {
		ev := map[string]any{"event": name, "distinct_id": id, "timestamp": at.Format(time.RFC3339), "properties": props}
		for i := 0; i+1 < len(extra); i += 2 {
			ev[extra[i].(string)] = extra[i+1]
		}
		evs = append(evs, ev)
	}
	for i, browser := range browsers {
		id := fmt.Sprintf("u%d", i)
		if i == 5 {
			id = "anon-5" // identified at the end
		}
		t0 := day.Add(time.Duration(i) * time.Hour)
		plan := []string{"pro", "free"}[i%2]
		add("signup", id, t0, map[string]any{"$browser": browser, "plan": plan, "$set_once": map[string]any{"first_seen": "2026-03-02", "referrer": "https://search.example/?q=a&b=<c>"}},
			"$set", map[string]any{"plan": plan, "email": fmt.Sprintf("u%d@example.com", i), "name": fmt.Sprintf("Zoë \"%d\" <b>&", i), "seats": i + 1})
		add("$pageview", id, t0.Add(time.Minute), map[string]any{"$current_url": "https://example.com/home/", "$browser": browser, "city": "Zürich",
			"html": "<b>&</b>", "$feature/new-onboarding": true, "note": "line\nbreak \u2028 \\ \"q\" 😀", "$lib": "posthog-python"})
		add("$pageview", id, t0.Add(2*time.Minute), map[string]any{"$current_url": "https://example.com/pricing?plan=pro&x=1", "$browser": browser})
		add("$screen", id, t0.Add(3*time.Minute), map[string]any{"$screen_name": "Settings/Profile", "$browser": browser})
		if i%2 == 0 {
			add("purchase", id, t0.Add(4*time.Minute), map[string]any{"amount": 19.99 + float64(i), "$browser": browser, "currency": "€"})
		}
		if i < 4 {
			add("$pageview", id, t0.Add(24*time.Hour), map[string]any{"$current_url": "https://example.com/home/", "$browser": browser})
		}
	}
	add("$identify", "u5", day.Add(30*time.Hour), map[string]any{"$anon_distinct_id": "anon-5", "$browser": "Firefox"}, "$set", map[string]any{"plan": "pro"})
	return evs
}

// styleQuery is a route and its query string.
type styleQuery struct {
	route string
	q     url.Values
}

func (q styleQuery) String() string { return q.route + "?" + q.q.Encode() }

func styleQueries() []styleQuery {
	rng := []string{"date_from", "2026-03-01", "date_to", "2026-03-09"}
	with := func(kv ...string) url.Values { return params(append(append([]string{}, rng...), kv...)...) }
	pageviewChrome := `[{"id":"$pageview","type":"events","properties":[{"key":"$browser","value":"Chrome","type":"event"}]}]`
	trends := func(events string, kv ...string) styleQuery {
		return styleQuery{"persons/trends/", with(append([]string{"events", events, "entity_type", "events", "entity_order", "0"}, kv...)...)}
	}
	funnel := `[{"id":"$pageview","type":"events","order":0},{"id":"purchase","type":"events","order":1}]`
	path := func(kv ...string) styleQuery {
		return styleQuery{"persons/path/", with(append([]string{"include_event_types", `["$pageview","$screen"]`}, kv...)...)}
	}
	return []styleQuery{
		{"persons/", params("limit", "100")},
		{"persons/", params("properties", `[{"key":"plan","value":"pro","type":"person"}]`)},
		{"persons/", params("properties", `[{"key":"name","value":"Zoë \"0\" <b>&","type":"person"},{"key":"seats","value":"1","type":"person"}]`)},
		{"persons/", params("properties", `[{"key":"referrer","value":"https://search.example/?q=a&b=<c>","type":"person"}]`)},
		{"persons/values/", params("key", "plan")},
		trends(pageviewChrome),
		trends(`[{"id":"$pageview","type":"events"}]`, "properties", `[{"key":"city","value":"Zürich"},{"key":"html","value":"<b>&</b>"},`+
			`{"key":"$feature/new-onboarding","operator":"is_set"},{"key":"note","value":"break \u2028 \\ \"q\" 😀","operator":"icontains"}]`),
		trends(`[{"id":"purchase","type":"events","math":"sum","math_property":"amount"}]`),
		trends(`[{"id":"purchase","type":"events","properties":[{"key":"currency","value":"€"}]}]`),
		trends(`[{"id":"$pageview","type":"events"}]`, "breakdown", "$browser", "breakdown_value", "Firefox"),
		trends(`[{"id":"$pageview","type":"events"}]`, "properties", `[{"key":"$current_url","value":"https://example.com/pricing?plan=pro&x=1"}]`),
		{"persons/stickiness/", with("events", pageviewChrome, "entity_type", "events", "entity_order", "0", "stickiness_days", "2")},
		{"persons/lifecycle/", with("events", pageviewChrome, "target_date", "2026-03-02", "lifecycle_type", "new")},
		{"persons/retention/", params("target_entity", `{"id":"signup","type":"events"}`, "returning_entity", `{"id":"$pageview","type":"events"}`,
			"period", "Day", "total_intervals", "7", "date_to", "2026-03-08", "breakdowns", `[{"property":"$browser","type":"event"}]`, "breakdown_values", `["Chrome"]`)},
		{"persons/funnel/", with("events", funnel, "breakdown", "$browser", "funnel_step", "2", "funnel_step_breakdown", "Chrome")},
		{"persons/funnel/", with("events", `[{"id":"$pageview","type":"events","order":0,"properties":[{"key":"$current_url","value":"pricing","operator":"icontains"}]},`+
			`{"id":"purchase","type":"events","order":1}]`, "funnel_step", "2")},
		{"persons/funnel/correlation/", with("events", `[{"id":"signup","type":"events","order":0},{"id":"purchase","type":"events","order":1}]`,
			"funnel_correlation_type", "event_with_properties", "funnel_correlation_person_converted", "true",
			"funnel_correlation_person_entity", `{"id":"$screen","type":"events","properties":[{"key":"$screen_name","value":"Settings/Profile","type":"event"}]}`)},
		path("path_start_key", "1_https://example.com/home", "path_end_key", "2_https://example.com/pricing?plan=pro&x=1"),
		path("path_start_key", "2_https://example.com/pricing?plan=pro&x=1", "path_end_key", "3_Settings/Profile"),
		path("start_point", "https://example.com/pricing?plan=pro&x=1"),
	}
}

// styleAnswer is a route's answer with what differs between projects by
// design taken out: person ids and uuids (ids are stream sequences, uuids
// hash the project) and the links (they name the project).
func (c *captureEnv) styleAnswer(t *testing.T, project uint64, q styleQuery) string {
	t.Helper()
	r := c.get(c.keyAll, fmt.Sprintf("/api/projects/%d/%s?%s", project, q.route, q.q.Encode()))
	if r.status != 200 {
		t.Fatalf("%s: %d %s", q, r.status, r.body)
	}
	var v any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s: %s: %v", q, r.body, err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"id", "uuid", "next", "initial", "last_refresh"} {
				delete(x, k)
			}
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	out, _ := json.Marshal(v)
	return string(out)
}

// pythonJSON returns a function writing a document (or JSON lines) as
// Python's json.dumps writes it by default (", " and ": ", non-ASCII as
// \u escapes), so a real encoder other than Go's and JavaScript's is in
// the test. CI has python3; without it the test fails saying so.
func pythonJSON(t *testing.T) func(*testing.T, []byte) []byte {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("this test writes its fixtures with Python's json.dumps and needs python3 on PATH (apt-get install -y python3): %v", err)
	}
	const script = `import json, sys
for line in sys.stdin.read().split("\n"):
    if line.strip():
        sys.stdout.write(json.dumps(json.loads(line)) + "\n")`
	return func(t *testing.T, doc []byte) []byte {
		cmd := exec.Command(py, "-c", script)
		cmd.Stdin = bytes.NewReader(doc)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3 json.dumps: %v\n%s", err, stderr.Bytes())
		}
		if !bytes.Contains(out, []byte(`": `)) {
			t.Fatalf("python3 json.dumps wrote no space after a colon: %.200s", out)
		}
		return out
	}
}
