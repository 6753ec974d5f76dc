package httpapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/testenv"
)

// geoipTS uses meta.geoip as PostHog's bundled legacy GeoIP
// transformation does: the address from properties.$ip, locate called
// without await, the City model's fields, subdivisions numbered from 1,
// and the location put on the person through properties.$set (each
// field null first) and properties.$set_once ($initial_ names).
const geoipTS = `const fields = ['city_name', 'country_code', 'continent_code', 'postal_code', 'time_zone', 'latitude', 'subdivision_1_code', 'subdivision_2_code']
export function processEvent(event: any, { geoip }: any) {
  const ip = event.properties?.$ip
  if (!ip || event.properties.$geoip_disable) return event
  const r = geoip.locate(String(ip))
  if (!r) { event.properties.$geoip_missed = true; return event }
  const at: Record<string, any> = {
    city_name: r.city?.names?.en, country_code: r.country?.isoCode, continent_code: r.continent?.code,
    postal_code: r.postal?.code, time_zone: r.location?.timeZone, latitude: r.location?.latitude,
  }
  for (const [i, s] of r.subdivisions.entries()) at['subdivision_' + (i + 1) + '_code'] = s.isoCode
  const set: Record<string, any> = {}, once: Record<string, any> = {}
  for (const f of fields) { set['$geoip_' + f] = null; once['$initial_geoip_' + f] = null }
  event.properties.$set = { ...set, ...(event.properties.$set ?? {}) }
  event.properties.$set_once = { ...once, ...(event.properties.$set_once ?? {}) }
  for (const [k, v] of Object.entries(at)) {
    if (v === undefined) continue
    event.properties['$geoip_' + k] = v
    event.properties.$set['$geoip_' + k] = v
    event.properties.$set_once['$initial_geoip_' + k] = v
  }
  return event
}`

// TestGeoIPTransformation: a source plugin using meta.geoip, installed and
// enabled through the API, locates the events captured through /batch/
// from a real GeoLite2 City database, leaves a private address and an
// event without one as they came, answers the same in the API's dry run,
// and a replay with the same file stores the same events and persons.
func TestGeoIPTransformation(t *testing.T) {
	db, err := geoip.Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	e := newTransformEnvGeoIP(t, db)
	_, stop := e.runIngester(e.store, "ingester")
	cfg, _ := e.install("", geoipTS, 1, `{}`)
	ev := func(name, id, props string) string {
		return fmt.Sprintf(`{"event":%q,"distinct_id":%q,"properties":%s}`, name, id, props)
	}
	e.capture(ev("gb", "u1", `{"$ip":"81.2.69.142"}`), ev("private", "u2", `{"$ip":"10.0.0.1"}`), ev("none", "u3", `{"n":1}`),
		ev("v6", "u4", `{"$ip":"2001:4860:4860::8888"}`))
	testenv.WaitCommitted(t, e.store, "ingester", e.lastSeq(), 30*time.Second)
	stop()

	got := map[string]map[string]any{}
	first := storedEvents(t, e.store, e.projectA.ID)
	for _, row := range first {
		parts := strings.SplitN(row, " ", 3)
		var props map[string]any
		if err := json.Unmarshal([]byte(parts[2]), &props); err != nil {
			t.Fatalf("%s: %v", row, err)
		}
		got[parts[0]] = props
	}
	want := map[string]map[string]any{
		"gb": {"$ip": "81.2.69.142", "$geoip_city_name": "Gamlingay", "$geoip_country_code": "GB", "$geoip_continent_code": "EU",
			"$geoip_postal_code": "SG19", "$geoip_time_zone": "Europe/London", "$geoip_latitude": 52.1398,
			"$geoip_subdivision_1_code": "ENG", "$geoip_subdivision_2_code": "CAM"},
		"private": {"$ip": "10.0.0.1", "$geoip_missed": true},
		"none":    {"n": 1.0},
		"v6":      {"$ip": "2001:4860:4860::8888", "$geoip_country_code": "US", "$geoip_continent_code": "NA", "$geoip_time_zone": "America/Chicago", "$geoip_latitude": 37.751},
	}
	for name, w := range want {
		g := got[name]
		delete(g, "$set") // the person's copies are checked below
		delete(g, "$set_once")
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: stored %v\nwant %v", name, g, w)
		}
	}
	persons := storedPersons(t, e.store, e.projectA.ID)
	// Each located field on the person as $geoip_ (set) and $initial_geoip_
	// (set once); a field the record lacks is null there, as the plugin
	// sets it.
	wantPersons := []string{
		`u1 {"$geoip_city_name":"Gamlingay","$geoip_continent_code":"EU","$geoip_country_code":"GB","$geoip_latitude":52.1398,"$geoip_postal_code":"SG19","$geoip_subdivision_1_code":"ENG","$geoip_subdivision_2_code":"CAM","$geoip_time_zone":"Europe/London",` +
			`"$initial_geoip_city_name":"Gamlingay","$initial_geoip_continent_code":"EU","$initial_geoip_country_code":"GB","$initial_geoip_latitude":52.1398,"$initial_geoip_postal_code":"SG19","$initial_geoip_subdivision_1_code":"ENG","$initial_geoip_subdivision_2_code":"CAM","$initial_geoip_time_zone":"Europe/London"}`,
		`u2 {}`, `u3 {}`,
		`u4 {"$geoip_city_name":null,"$geoip_continent_code":"NA","$geoip_country_code":"US","$geoip_latitude":37.751,"$geoip_postal_code":null,"$geoip_subdivision_1_code":null,"$geoip_subdivision_2_code":null,"$geoip_time_zone":"America/Chicago",` +
			`"$initial_geoip_city_name":null,"$initial_geoip_continent_code":"NA","$initial_geoip_country_code":"US","$initial_geoip_latitude":37.751,"$initial_geoip_postal_code":null,"$initial_geoip_subdivision_1_code":null,"$initial_geoip_subdivision_2_code":null,"$initial_geoip_time_zone":"America/Chicago"}`,
	}
	if !slices.Equal(persons, wantPersons) {
		t.Errorf("persons:\n%s\nwant:\n%s", strings.Join(persons, "\n"), strings.Join(wantPersons, "\n"))
	}

	// The API's dry run reads the same database.
	res := e.call(200, "POST", fmt.Sprintf("/api/projects/%d/plugin_configs/%d/test/", e.projectA.ID, cfg),
		`{"event":"try","distinct_id":"d","properties":{"$ip":"13.106.122.3"}}`)
	props := res["event"].(map[string]any)["properties"].(map[string]any)
	if props["$geoip_city_name"] != "Sydney" || props["$geoip_country_code"] != "AU" || props["$geoip_subdivision_1_code"] != "NSW" {
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
