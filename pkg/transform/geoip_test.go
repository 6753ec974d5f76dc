package transform

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/personhub/personhub/pkg/geoip"
	"github.com/personhub/personhub/pkg/testenv"
)

// geoPlugin reads meta.geoip as PostHog's GeoIP plugin does (awaiting
// locate, the City model's camelCase fields, subdivisions by entries()),
// written here: the address is properties.$ip.
const geoPlugin = `
export async function processEvent(event, meta) {
  const props = event.properties
  const found = await meta.geoip.locate(props.$ip)
  props.$geo_found = found !== null
  if (!found) return event
  const put = (k, v) => { props['$geoip_' + k] = v }
  if (found.city) put('city_name', found.city.names?.en)
  if (found.country) { put('country_name', found.country.names?.en); put('country_code', found.country.isoCode) }
  if (found.continent) { put('continent_name', found.continent.names?.en); put('continent_code', found.continent.code) }
  if (found.postal) put('postal_code', found.postal.code)
  if (found.location) {
    put('latitude', found.location.latitude); put('longitude', found.location.longitude)
    put('time_zone', found.location.timeZone); put('accuracy_radius', found.location.accuracyRadius)
  }
  for (const [i, s] of found.subdivisions.entries()) {
    put('subdivision_' + (i + 1) + '_code', s.isoCode)
    put('subdivision_' + (i + 1) + '_name', s.names?.en)
  }
  props.$geo_json = JSON.stringify(found)
  found.country.isoCode = 'changed by the plugin'
  props.$geo_again = (await meta.geoip.locate(props.$ip)).country.isoCode
  return event
}`

// syncGeoPlugin calls locate without await, as PostHog's bundled legacy
// GeoIP transformation does, and calls it with what is no address string.
const syncGeoPlugin = `
exports.processEvent = function(event, { geoip }) {
  const r = geoip.locate(event.properties.$ip)
  event.properties.sync_country = r ? r.country.isoCode : null
  event.properties.sync_tz = r ? r.location.timeZone : null
  event.properties.odd = [geoip.locate(), geoip.locate(null), geoip.locate(81), geoip.locate({}), geoip.locate('81.2.69.142 ')].map(String).join(',')
  return event
}`

func geoRuntime(t *testing.T, db *geoip.DB) *Runtime {
	t.Helper()
	var opts []Option
	if db != nil {
		opts = append(opts, WithGeoIP(db))
	}
	return New(Limits{Timeout: 5e9}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, opts...)
}

func runGeo(t *testing.T, r *Runtime, src, ip string) map[string]any {
	t.Helper()
	ev := sample("$pageview")
	ev.Properties = map[string]any{"$ip": ip}
	res := r.Run(context.Background(), []Step{{ConfigID: 1, PluginID: 1, Filename: "index.ts", Source: src, Config: map[string]any{}}}, ev)
	if len(res.Steps) != 1 || res.Steps[0].Outcome != OutcomeOK || res.Event == nil {
		t.Fatalf("%s: step %+v", ip, res.Steps)
	}
	return res.Event.Properties
}

// TestGeoIPLocate runs the plugin against a real GeoLite2 City database:
// addresses whose records were read from it with the library, a private
// and a reserved address, and strings that are no address.
func TestGeoIPLocate(t *testing.T) {
	db, err := geoip.Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := geoRuntime(t, db)
	cases := map[string]map[string]any{
		"81.2.69.142": {
			"$geoip_city_name": "Gamlingay", "$geoip_country_name": "United Kingdom", "$geoip_country_code": "GB",
			"$geoip_continent_name": "Europe", "$geoip_continent_code": "EU", "$geoip_postal_code": "SG19",
			"$geoip_latitude": 52.1398, "$geoip_longitude": -0.2399, "$geoip_time_zone": "Europe/London", "$geoip_accuracy_radius": 100.0,
			"$geoip_subdivision_1_code": "ENG", "$geoip_subdivision_1_name": "England",
			"$geoip_subdivision_2_code": "CAM", "$geoip_subdivision_2_name": "Cambridgeshire",
		},
		"89.160.20.129": {
			"$geoip_city_name": "Tumba", "$geoip_country_code": "SE", "$geoip_postal_code": "147 00",
			"$geoip_time_zone": "Europe/Stockholm", "$geoip_subdivision_1_code": "AB", "$geoip_subdivision_1_name": "Stockholm",
		},
		"2001:4860:4860::8888": {"$geoip_country_code": "US", "$geoip_continent_code": "NA", "$geoip_time_zone": "America/Chicago"},
	}
	for ip, want := range cases {
		props := runGeo(t, r, geoPlugin, ip)
		if props["$geo_found"] != true {
			t.Fatalf("%s: not found: %v", ip, props)
		}
		for k, v := range want {
			if props[k] != v {
				t.Errorf("%s: %s = %#v, want %#v", ip, k, props[k], v)
			}
		}
		if props["$geo_again"] != props["$geoip_country_code"] {
			t.Errorf("%s: a second locate saw the first answer's change: %v", ip, props["$geo_again"])
		}
		js, _ := props["$geo_json"].(string)
		if !strings.HasPrefix(js, `{"continent":{"code":`) || !strings.Contains(js, `"traits":{"isAnonymous":false,`) || !strings.Contains(js, `"ipAddress":"`+ip+`"`) {
			t.Errorf("%s: JSON.stringify(response) = %s", ip, js)
		}
	}
	// A record without a city: the model's empty city, postal and
	// subdivisions, as geoip2-node gives them.
	props := runGeo(t, r, geoPlugin, "8.8.8.8")
	if props["$geoip_country_code"] != "US" || props["$geoip_city_name"] != nil || props["$geoip_subdivision_1_code"] != nil {
		t.Errorf("8.8.8.8: %v", props)
	}
	for _, ip := range []string{"10.1.2.3", "192.168.0.1", "127.0.0.1", "::1", "", "not an ip", "300.1.1.1", "81.2.69.142/22", strings.Repeat("9", 1000)} {
		if props := runGeo(t, r, geoPlugin, ip); props["$geo_found"] != false || props["$geoip_country_code"] != nil {
			t.Errorf("%q: %v, want null", ip, props)
		}
	}
	props = runGeo(t, r, syncGeoPlugin, "81.2.69.142")
	if props["sync_country"] != "GB" || props["sync_tz"] != "Europe/London" || props["odd"] != "null,null,null,null,null" {
		t.Errorf("sync: %v", props)
	}
}

// TestGeoIPReplay: the same event through a fresh runtime with the same
// file gives the same properties, key order of the answer included, and
// what a plugin changes in an answer is not seen by the next call.
func TestGeoIPReplay(t *testing.T) {
	db, err := geoip.Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := geoRuntime(t, db)
	first := runGeo(t, r, geoPlugin, "81.2.69.142")
	again := runGeo(t, r, geoPlugin, "81.2.69.142")
	replay := runGeo(t, geoRuntime(t, db), geoPlugin, "81.2.69.142")
	if !reflect.DeepEqual(first, again) || !reflect.DeepEqual(first, replay) {
		t.Errorf("runs differ:\n%v\n%v\n%v", first, again, replay)
	}
	if first["$geoip_city_name"] != "Gamlingay" {
		t.Errorf("city %v", first["$geoip_city_name"])
	}
}

// TestGeoIPNoDatabase: without a database locate answers null, awaited or
// not, and the event goes on unchanged otherwise.
func TestGeoIPNoDatabase(t *testing.T) {
	r := geoRuntime(t, nil)
	props := runGeo(t, r, geoPlugin, "81.2.69.142")
	if props["$geo_found"] != false || props["$geoip_country_code"] != nil || props["$ip"] != "81.2.69.142" {
		t.Errorf("no database: %v", props)
	}
	props = runGeo(t, r, syncGeoPlugin, "81.2.69.142")
	if props["sync_country"] != nil || props["odd"] != "null,null,null,null,null" {
		t.Errorf("no database, sync: %v", props)
	}
}

// TestGeoIPValueOwnKeys: a record key __proto__ (a database is an outside
// file) is an own property of the answer, never its prototype.
func TestGeoIPValueOwnKeys(t *testing.T) {
	prog, err := compile("index.js", `exports.processEvent = function(e) { return e }`)
	if err != nil {
		t.Fatal(err)
	}
	in, err := newInstance(prog, nil, nil, Limits{}.withDefaults(), newWatchdog(time.Millisecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := in.geoValue(geoip.Object{Keys: []string{"__proto__", "a"}, Values: []any{geoip.Object{Keys: []string{"polluted"}, Values: []any{true}}, 1.0}})
	if err := in.vm.Set("v", v); err != nil {
		t.Fatal(err)
	}
	got, err := in.vm.RunString(`[v.polluted === undefined, Object.getPrototypeOf(v) === Object.prototype, Object.keys(v).join(','), v.__proto__.polluted, JSON.stringify(v)].join(' ')`)
	if err != nil {
		t.Fatal(err)
	}
	if want := `true true __proto__,a true {"__proto__":{"polluted":true},"a":1}`; got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
