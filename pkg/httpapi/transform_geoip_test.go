package httpapi

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/testenv"
	"github.com/personhub/personhub/pkg/testenv/pluginfixture"
)

// TestGeoIPTransformation: the GeoIP-shaped plugin (test/posthog-plugins/
// geoip.ts, meta.geoip as PostHog's bundled GeoIP transformation uses it),
// installed and enabled through the API, locates the events captured
// through /batch/ from a real GeoLite2 City database and puts the
// location on their persons; a private address, a disabled event and one
// without an address pass as they came; the API's dry run answers from
// the same database; and a replay with the same file stores the same
// events and persons.
func TestGeoIPTransformation(t *testing.T) {
	db, err := geoip.Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	src, err := pluginfixture.Source(filepath.Join("..", ".."), "geoip.ts")
	if err != nil {
		t.Fatal(err)
	}
	e := newTransformEnvGeoIP(t, db)
	_, stop := e.runIngester(e.store, "ingester")
	cfg, _ := e.install("", src, 1, `{}`)
	ev := func(name, id, props string) string {
		return fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, id, props)
	}
	e.capture(ev("gb", "u1", `{"$ip":"81.2.69.142"}`), ev("private", "u2", `{"$ip":"10.0.0.1"}`),
		ev("v6", "u4", `{"$ip":"2001:4860:4860::8888"}`), ev("local", "u5", `{"$ip":"127.0.0.1"}`),
		ev("off", "u6", `{"$ip":"81.2.69.142","$geoip_disable":true}`))
	// Events without $ip: capture records the client's address, here
	// given by a trusted proxy.
	e.captureFrom("81.2.69.142", ev("forwarded", "u7", `{"n":1}`))
	e.captureFrom("192.0.2.7", ev("none", "u3", `{"n":1}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	stop()

	// Each event's $geoip_ properties, all of them.
	located := map[string]map[string]any{}
	ips := map[string]any{}
	first := storedEvents(t, e.store, e.projectA.ID)
	for _, row := range first {
		parts := strings.SplitN(row, " ", 3)
		var props map[string]any
		if err := json.Unmarshal([]byte(parts[2]), &props); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
		located[parts[0]] = map[string]any{}
		ips[parts[0]] = props["$ip"]
		for k, v := range props {
			if strings.HasPrefix(k, "$geoip_") && k != "$geoip_disable" {
				located[parts[0]][k] = v
			}
		}
	}
	want := map[string]map[string]any{
		"gb": {"$geoip_city_name": "Gamlingay", "$geoip_country_name": "United Kingdom", "$geoip_country_code": "GB",
			"$geoip_continent_name": "Europe", "$geoip_continent_code": "EU", "$geoip_postal_code": "SG19",
			"$geoip_latitude": 52.1398, "$geoip_longitude": -0.2399, "$geoip_accuracy_radius": 100.0, "$geoip_time_zone": "Europe/London",
			"$geoip_subdivision_1_code": "ENG", "$geoip_subdivision_1_name": "England",
			"$geoip_subdivision_2_code": "CAM", "$geoip_subdivision_2_name": "Cambridgeshire"},
		// No city or postal code in this record: their fields are
		// undefined, which JSON leaves out.
		"v6": {"$geoip_country_name": "United States", "$geoip_country_code": "US", "$geoip_continent_name": "North America",
			"$geoip_continent_code": "NA", "$geoip_latitude": 37.751, "$geoip_longitude": -97.822, "$geoip_accuracy_radius": 100.0,
			"$geoip_time_zone": "America/Chicago"},
		"local": {"$geoip_city_name": "Sydney", "$geoip_country_name": "Australia", "$geoip_country_code": "AU",
			"$geoip_continent_name": "Oceania", "$geoip_continent_code": "OC", "$geoip_postal_code": "2000",
			"$geoip_latitude": -33.8591, "$geoip_longitude": 151.2002, "$geoip_accuracy_radius": 1000.0, "$geoip_time_zone": "Australia/Sydney",
			"$geoip_subdivision_1_code": "NSW", "$geoip_subdivision_1_name": "New South Wales"},
		"private": {}, "none": {}, "off": {},
	}
	want["forwarded"] = want["gb"]
	// $ip as the client sent it, else the address capture recorded.
	wantIPs := map[string]any{"gb": "81.2.69.142", "private": "10.0.0.1", "v6": "2001:4860:4860::8888", "local": "127.0.0.1",
		"off": "81.2.69.142", "forwarded": "81.2.69.142", "none": "192.0.2.7"}
	if fmt.Sprint(ips) != fmt.Sprint(wantIPs) {
		t.Errorf("stored $ip %v\nwant %v", ips, wantIPs)
	}
	for name, w := range want {
		if g := located[name]; fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: stored %v\nwant %v", name, g, w)
		}
	}

	// The persons: the location set, the first one set once, and the
	// plugin's nulls for what a record lacks.
	persons := storedPersons(t, e.store, e.projectA.ID)
	person := map[string]map[string]any{}
	for _, p := range persons {
		id, props, _ := strings.Cut(p, " ")
		var m map[string]any
		if err := json.Unmarshal([]byte(props), &m); err != nil {
			t.Fatal(err)
		}
		person[id] = m
	}
	for _, c := range []struct {
		id, key string
		v       any
	}{
		{"u1", "$geoip_city_name", "Gamlingay"}, {"u1", "$initial_geoip_city_name", "Gamlingay"}, {"u1", "$geoip_subdivision_2_code", "CAM"},
		{"u1", "$geoip_city_confidence", nil}, {"u4", "$geoip_country_code", "US"}, {"u4", "$initial_geoip_time_zone", "America/Chicago"},
		{"u4", "$geoip_subdivision_1_code", nil}, {"u5", "$geoip_city_name", "Sydney"}, {"u7", "$geoip_city_name", "Gamlingay"},
	} {
		if v, ok := person[c.id][c.key]; !ok || v != c.v {
			t.Errorf("person %s: %s = %#v (present %v), want %#v", c.id, c.key, v, ok, c.v)
		}
	}
	for _, id := range []string{"u2", "u3", "u6"} {
		if len(person[id]) != 0 {
			t.Errorf("person %s: %v, want no properties", id, person[id])
		}
	}

	// The API's dry run reads the same database.
	res := e.call(200, "POST", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/test/", e.projectA.ID, cfg),
		`{"event":"try","distinct_id":"d","properties":{"$ip":"89.160.20.129"}}`)
	props := res["event"].(map[string]any)["properties"].(map[string]any)
	if props["$geoip_city_name"] != "Tumba" || props["$geoip_country_code"] != "SE" || props["$geoip_subdivision_1_code"] != "AB" {
		t.Errorf("dry run: %v", props)
	}

	// Replay: a new database, a new process, the same log and file.
	replay := testenv.ClickHouse(t)
	e.runIngester(replay, "replay")
	testenv.WaitCommitted(t, replay, "replay", e.lastSeq(), 30*time.Second)
	if again := storedEvents(t, replay, e.projectA.ID); !slices.Equal(again, first) {
		t.Fatalf("replay events:\n%s\nfirst run:\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}
	if again := storedPersons(t, replay, e.projectA.ID); !slices.Equal(again, persons) {
		t.Fatalf("replay persons %v, first run %v", again, persons)
	}
}

// TestAdvancedGeoIPAfterGeoIP: PostHog's Advanced GeoIP shape chained
// after the GeoIP shape: the address is located, then discarded; events
// of a listed library keep no GeoIP property, on the event or the person.
func TestAdvancedGeoIPAfterGeoIP(t *testing.T) {
	db, err := geoip.Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	root := filepath.Join("..", "..")
	located, err := pluginfixture.Source(root, "geoip.ts")
	if err != nil {
		t.Fatal(err)
	}
	advanced, err := pluginfixture.Source(root, "advanced-geoip.js")
	if err != nil {
		t.Fatal(err)
	}
	e := newTransformEnvGeoIP(t, db)
	e.runIngester(e.store, "ingester")
	e.install("", located, 1, `{}`)
	e.installFile("", "index.js", advanced, 2, `{"discardIp":"true","discardLibs":"posthog-node, posthog-python"}`)
	e.capture(`{"event":"web","distinct_id":"u1","properties":{"$ip":"81.2.69.142","$lib":"web"}}`,
		`{"event":"server","distinct_id":"u2","properties":{"$ip":"81.2.69.142","$lib":"posthog-node"}}`)
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	for _, row := range storedEvents(t, e.store, e.projectA.ID) {
		name, rest, _ := strings.Cut(row, " ")
		_, props, _ := strings.Cut(rest, " ")
		var m map[string]any
		if err := json.Unmarshal([]byte(props), &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["$ip"]; ok {
			t.Errorf("%s: $ip kept: %v", name, m)
		}
		city := m["$geoip_city_name"]
		if name == "web" && city != "Gamlingay" || name == "server" && city != nil {
			t.Errorf("%s: $geoip_city_name %v", name, city)
		}
		if name == "server" && (m["$set"] != nil && len(m["$set"].(map[string]any)) > 0) {
			t.Errorf("server: $set %v, want no GeoIP property for the person", m["$set"])
		}
	}
	persons := storedPersons(t, e.store, e.projectA.ID)
	if len(persons) != 2 || !strings.HasPrefix(persons[0], "u1 ") || !strings.Contains(persons[0], `"$geoip_city_name":"Gamlingay"`) || persons[1] != "u2 {}" {
		t.Fatalf("persons %v: want u1 located, u2 without a property", persons)
	}
}
