package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/pluginfixture"
)

// TestPostHogTransformations: plugins in the shape of PostHog's bundled
// legacy transformations (test/posthog-plugins: this project's code, using
// the runtime APIs the PostHog plugins use) installed through the API as
// a user would (pipeline_transformations, update_source, plugin_configs),
// each fed events through /batch/, the stored events held against what
// the plugin's documentation says it does.
func TestPostHogTransformations(t *testing.T) {
	e := newTransformEnv(t)
	e.runIngester(e.store, "ingester")
	ev := func(name, id, props string) string {
		return fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, id, props)
	}
	sha := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	// kept is downsampling's rule, computed here: the first 15 hex digits
	// of the key's SHA-256 as a fraction below the share.
	kept := func(key string, share float64) bool {
		n, _ := strconv.ParseUint(sha(key)[:15], 16, 64)
		return float64(n)/float64(uint64(1)<<60) < share
	}
	var sampled, sampledIDs []string
	for i := range 40 {
		id := fmt.Sprintf("person-%d", i)
		sampled = append(sampled, ev("view", id, `{}`))
		if kept(id, 0.3) {
			sampledIDs = append(sampledIDs, `view `+id+` {}`)
		}
	}
	if len(sampledIDs) == 0 || len(sampledIDs) == 40 {
		t.Fatalf("the sample keeps %d of 40: pick other ids", len(sampledIDs))
	}

	for _, c := range []struct {
		plugin, config string
		events         []string
		want           []string
		failed         float64 // events the step failed (kept as the previous step gave them)
	}{{
		plugin: "taxonomy.js", config: `{"defaultNamingConvention":"snake_case"}`,
		events: []string{ev("Sign Up Clicked", "u1", `{}`), ev("pageViewed", "u1", `{}`), ev("$pageview", "u1", `{}`)},
		want:   []string{`sign_up_clicked u1 {}`, `page_viewed u1 {}`, `$pageview u1 {}`},
	}, {
		plugin: "semver-flattener.ts", config: `{"properties":"app_version, lib"}`,
		events: []string{ev("e", "u1", `{"app_version":"1.22.3-beta.1+build.5","lib":"2.0","other":"1.2.3"}`)},
		want: []string{`e u1 {"app_version":"1.22.3-beta.1+build.5","app_version__build":"build.5","app_version__major":1,"app_version__minor":22,` +
			`"app_version__patch":3,"app_version__preRelease":"beta.1","lib":"2.0","lib__major":2,"lib__minor":0,"other":"1.2.3"}`},
	}, {
		plugin: "flatten-properties.js", config: `{"separator":"__"}`,
		events: []string{ev("e", "u1", `{"a":{"b":{"c":1},"d":[1,2]},"x":"y"}`)},
		want:   []string{`e u1 {"a":{"b":{"c":1},"d":[1,2]},"a__b__c":1,"a__d":[1,2],"x":"y"}`},
	}, {
		plugin: "property-filter.js", config: `{"properties":"password, card.number"}`,
		events: []string{ev("e", "u1", `{"password":"p","card":{"number":"4111","type":"visa"},"keep":1}`)},
		want:   []string{`e u1 {"card":{"type":"visa"},"keep":1}`},
	}, {
		plugin: "drop-events-on-property.js", config: `{"property_key":"env","property_values":"test, dev"}`,
		events: []string{ev("a", "u1", `{"env":"test"}`), ev("b", "u1", `{"env":"prod"}`), ev("c", "u1", `{}`), ev("d", "u1", `{"env":"dev"}`)},
		want:   []string{`b u1 {"env":"prod"}`, `c u1 {}`},
	}, {
		plugin: "downsampling.js", config: `{"percentage":"30","samplingMethod":"Distinct ID aware sampling"}`,
		events: sampled, want: sampledIDs,
	}, {
		plugin: "url-parameters-to-event-properties.js", config: `{"parameters":"utm_source, ref","prefix":"q_","setAsInitialUserProperties":"true"}`,
		events: []string{ev("$pageview", "u1", `{"$current_url":"https://a.io/p?utm_source=news&ref=x&ref=y&z=1"}`)},
		want: []string{`$pageview u1 {"$current_url":"https://a.io/p?utm_source=news&ref=x&ref=y&z=1","$set_once":{"initial_q_ref":"[\"x\",\"y\"]",` +
			`"initial_q_utm_source":"news"},"q_ref":"[\"x\",\"y\"]","q_utm_source":"news"}`},
	}, {
		plugin: "url-normalizer.js", config: `{}`,
		events: []string{ev("$pageview", "u1", `{"$current_url":"HTTPS://Example.COM:443/Docs/?b=2&a=1#top"}`)},
		want:   []string{`$pageview u1 {"$current_url":"https://example.com/Docs?a=1&b=2"}`},
	}, {
		plugin: "anonymization.js", config: `{"salt":"pepper","privateFields":"email","hashDistinctId":"true"}`,
		events: []string{ev("e", "alice", `{"email":"a@b.c","plan":"pro"}`)},
		want:   []string{`e ` + sha("pepperalice") + ` {"email":"` + sha("peppera@b.c") + `","plan":"pro"}`},
	}, {
		plugin: "language-url-splitter.ts",
		config: `{"pattern":"^/([a-z]{2})(?=/|#|\\?|$)","matchGroup":"1","property":"locale","replacePattern":"^(/[a-z]{2})(/|(?=/|#|\\?|$))","replaceKey":"$pathname","replaceValue":"/"}`,
		events: []string{ev("$pageview", "u1", `{"$pathname":"/de/docs/start"}`), ev("$pageview", "u1", `{"$pathname":"/docs"}`), ev("$pageview", "u1", `{"$pathname":"/fr"}`)},
		want:   []string{`$pageview u1 {"$pathname":"/docs/start","locale":"de"}`, `$pageview u1 {"$pathname":"/docs"}`, `$pageview u1 {"$pathname":"/","locale":"fr"}`},
	}, {
		plugin: "route-censor.js", config: `{"routes":"/users/:id, /orders/:order/items/:item"}`,
		events: []string{ev("$pageview", "u1", `{"$current_url":"https://shop.io/orders/991/items/7?x=1","$pathname":"/users/42","$referrer":"https://shop.io/about"}`)},
		want:   []string{`$pageview u1 {"$current_url":"https://shop.io/orders/:order/items/:item?x=1","$pathname":"/users/:id","$referrer":"https://shop.io/about"}`},
	}, {
		plugin: "timestamp-parser.js", config: `{}`,
		events: []string{`{"event":"e","distinct_id":"u1","timestamp":"2021-01-27T10:30:00Z","properties":{}}`,
			`{"event":"e","distinct_id":"u1","timestamp":"2024-02-29T23:59:00+02:00","properties":{}}`},
		want: []string{`e u1 {"day":"27","day_of_the_week":"Wednesday","hour":"10","minute":"30","month":"01","year":"2021"}`,
			`e u1 {"day":"29","day_of_the_week":"Thursday","hour":"21","minute":"59","month":"02","year":"2024"}`},
	}, {
		// meta.logger, and the person written through $set/$set_once.
		plugin: "snowplow-referer-parser.js", config: `{"internal_domains":"shop.io, app.shop.io"}`,
		events: []string{ev("$pageview", "u1", `{"$current_url":"https://shop.io/?utm_source=Newsletter&utm_medium=Email&utm_campaign=Spring+Sale"}`),
			ev("$pageview", "u2", `{"$referrer":"https://app.shop.io/home","$referring_domain":"app.shop.io"}`),
			ev("$pageview", "u3", `{"$referrer":"https://www.google.com/search?q=red+shoes&hl=en","$referring_domain":"www.google.com"}`),
			ev("$pageview", "u4", `{"$referrer":"https://blog.example/post","$referring_domain":"blog.example"}`)},
		want: []string{`$pageview u1 {"$current_url":"https://shop.io/?utm_source=Newsletter&utm_medium=Email&utm_campaign=Spring+Sale","medium":"email","source":"newsletter","term":null,"referrer_parser":"utm",` +
			`"$set":{"referrer_parser":"utm","medium":"email","source":"newsletter","term":null,"campaign":"spring sale"},` +
			`"$set_once":{"initial_referrer_parser":"utm","initial_medium":"email","initial_source":"newsletter","initial_term":null,"initial_campaign":"spring sale"}}`,
			`$pageview u2 {"$referrer":"https://app.shop.io/home","$referring_domain":"app.shop.io","source":"direct","referrer_parser":"direct_and_own_domains",` +
				`"$set":{"referrer_parser":"direct_and_own_domains","source":"direct"},"$set_once":{"initial_referrer_parser":"direct_and_own_domains","initial_medium":"undefined","initial_source":"direct"}}`,
			`$pageview u3 {"$referrer":"https://www.google.com/search?q=red+shoes&hl=en","$referring_domain":"www.google.com","medium":"search","source":"google","term":"red shoes","referrer_parser":"snowplow",` +
				`"$set":{"referrer_parser":"snowplow","medium":"search","source":"google","term":"red shoes"},"$set_once":{"initial_referrer_parser":"snowplow","initial_medium":"search","initial_source":"google","initial_term":"red shoes"}}`,
			`$pageview u4 {"$referrer":"https://blog.example/post","$referring_domain":"blog.example","medium":"unknown","source":"unknown","term":"","referrer_parser":"snowplow",` +
				`"$set":{"referrer_parser":"snowplow","medium":"unknown","source":"unknown","term":""},"$set_once":{"initial_referrer_parser":"snowplow","initial_medium":"unknown","initial_source":"unknown","initial_term":""}}`},
	}, {
		plugin: "url-parser.ts", config: `{}`,
		events: []string{ev("$pageview", "u1", `{"$current_url":"https://a.io/p?utm_campaign=x%20y&id=7"}`), ev("$pageview", "u1", `{"$current_url":"not a url"}`)},
		want: []string{`$pageview u1 {"$current_url":"https://a.io/p?utm_campaign=x%20y&id=7","url_id":"7","url_utm_campaign":"x y"}`,
			`$pageview u1 {"$current_url":"not a url"}`},
	}, {
		// Not runnable here, by design: each event is kept as captured.
		plugin: "app-unduplicator.js", config: `{"dedupMode":"All Properties"}`,
		events: []string{ev("e", "u1", `{"a":1}`)},
		want:   []string{`e u1 {"a":1}`}, failed: 1,
	}, {
		plugin: "first-time-event-tracker.js", config: `{"events":"signup"}`,
		events: []string{ev("signup", "u1", `{}`), ev("other", "u1", `{"b":2}`)},
		want:   []string{`signup u1 {}`, `other u1 {"b":2}`}, failed: 1,
	}, {
		plugin: "currency-normalization.js", config: `{"openExchangeRatesApiKey":"k"}`,
		events: []string{ev("order", "u1", `{"amount":10,"currency":"EUR"}`)},
		want:   []string{`order u1 {"amount":10,"currency":"EUR"}`}, failed: 1,
	}} {
		t.Run(c.plugin, func(t *testing.T) {
			src, err := pluginfixture.Source(filepath.Join("..", ".."), c.plugin)
			if err != nil {
				t.Fatal(err)
			}
			before := len(storedEvents(t, e.store, e.projectA.ID))
			config, _ := e.install("", string(src), 1, c.config)
			e.capture(c.events...)
			testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
			got := storedEvents(t, e.store, e.projectA.ID)[before:]
			if !slices.EqualFunc(got, c.want, sameEvent) {
				t.Errorf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			m := e.call(200, "GET", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, config), "")["metrics"].(map[string]any)
			if m["events_failed"] != c.failed || m["events_in"] != float64(len(c.events)) {
				t.Errorf("metrics %v: want %v failed of %d", m, c.failed, len(c.events))
			}
			// Off again, for the next plugin's events.
			e.call(200, "PATCH", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/", e.projectA.ID, config), `{"enabled":false}`)
		})
	}
}

// sameEvent compares two "name distinct_id properties" lines, the
// properties as JSON values (the stored text keeps the captured keys'
// order and appends what a step added).
func sameEvent(a, b string) bool {
	split := func(s string) (string, any) {
		i := strings.Index(s, " {")
		if i < 0 {
			return s, nil
		}
		var v any
		if json.Unmarshal([]byte(s[i+1:]), &v) != nil {
			return s, nil
		}
		return s[:i], v
	}
	ha, va := split(a)
	hb, vb := split(b)
	return ha == hb && reflect.DeepEqual(va, vb)
}

// TestTransformationRefusals: through the API, code that imports a
// module the runtime does not give is refused at upload naming it, and a
// plugin that runs nothing cannot be enabled; both in the error shape.
func TestTransformationRefusals(t *testing.T) {
	e := newTransformEnv(t)
	p := e.call(201, "POST", "/api/organizations/@current/pipeline_transformations/", `{"plugin_type":"source","name":"mine"}`)
	r := request(t, "POST", e.apiURL+fmt.Sprintf("/api/projects/%d/plugin_configs/", e.projectA.ID), e.keyAll,
		fmt.Sprintf(`{"plugin":%v,"enabled":true,"config":{}}`, p["id"]))
	wantError(t, r, 400, "validation_error", "invalid_input")
	if body := r.json(t); body["attr"] != "enabled" || !strings.Contains(fmt.Sprint(body["detail"]), "processEventBatch") {
		t.Fatalf("enable a plugin without code: %v", body)
	}
	r = request(t, "PATCH", e.apiURL+fmt.Sprintf("/api/organizations/@current/pipeline_transformations/%v/update_source/", p["id"]), e.keyAll,
		`{"index.ts":"import UAParser from 'ua-parser-js'\nexport function processEvent(e) { e.properties.ua = new UAParser(e.properties.$useragent).getResult(); return e }"}`)
	wantError(t, r, 400, "validation_error", "invalid_input")
	if body := r.json(t); body["attr"] != "index.ts" || !strings.Contains(fmt.Sprint(body["detail"]), `"ua-parser-js"`) {
		t.Fatalf("unprovided import: %v", body)
	}
}

// userAgentBundle bundles the user-agent fixture with its parser
// (detect-browser from test/node, the npm registry's) as a user bundles
// it for upload.
func userAgentBundle(t *testing.T) string {
	t.Helper()
	dir := clientPackage(t, "node", "detect-browser")
	b, err := pluginfixture.Bundle(filepath.Join("..", ".."), "user-agent.ts", filepath.Join(dir, "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPostHogUserAgentBundle: PostHog's User Agent Populator's shape,
// uploaded as users upload a plugin with a dependency (one esbuild
// bundle with detect-browser in it), stores for each user agent what
// detect-browser itself answers under Node.
func TestPostHogUserAgentBundle(t *testing.T) {
	bundle := userAgentBundle(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: this test needs Node.js 20.20 or newer (apt-get install nodejs npm), then `npm ci --prefix test/node`")
	}
	uas, _ := json.Marshal(pluginfixture.UserAgents)
	cmd := exec.Command(node, "--input-type=module", "-e",
		`import { detect } from 'detect-browser'; console.log(JSON.stringify(`+string(uas)+`.map((ua) => detect(ua))))`)
	cmd.Dir = clientPackage(t, "node", "detect-browser")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var answers []map[string]any
	if err := json.Unmarshal(out, &answers); err != nil || len(answers) != len(pluginfixture.UserAgents) {
		t.Fatalf("node answered %s (%v)", out, err)
	}

	e := newTransformEnv(t)
	e.runIngester(e.store, "ingester")
	e.installFile("", "index.js", bundle, 1, `{"overrideUserAgentDetails":"true"}`)
	var events, want []string
	for i, ua := range pluginfixture.UserAgents {
		props := map[string]any{"$useragent": ua}
		in, _ := json.Marshal(props)
		events = append(events, fmt.Sprintf(`{"event":"$pageview","distinct_id":"u%d","properties":%s}`, i, in))
		if a := answers[i]; a != nil {
			props["$browser"], props["$browser_version"], props["$os"], props["$browser_type"] = a["name"], a["version"], a["os"], a["type"]
		}
		stored, _ := json.Marshal(props)
		want = append(want, fmt.Sprintf("$pageview u%d %s", i, stored))
	}
	e.capture(events...)
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	got := storedEvents(t, e.store, e.projectA.ID)
	if !slices.EqualFunc(got, want, sameEvent) {
		t.Fatalf("stored:\n%s\nwant (detect-browser under Node):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
