package geoip

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oschwald/maxminddb-golang"

	"github.com/personhub/personhub/pkg/testenv"
)

func openCity(t *testing.T) *DB {
	t.Helper()
	start := time.Now()
	db, err := Open(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("opened %s (%s, built %s) in %s", db.Path(), db.Type(), db.Built().Format(time.DateOnly), time.Since(start))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// at follows a path of keys and indexes through a located object.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			o, ok := v.(Object)
			if !ok {
				return nil
			}
			v, _ = o.Get(k)
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// rawRecord is the record as the library decodes it, unshaped.
func rawRecord(t *testing.T, path, ip string) map[string]any {
	t.Helper()
	r, err := maxminddb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rec map[string]any
	if err := r.Lookup(net.ParseIP(ip), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestLocateKnownAddresses checks the City model of addresses whose
// records were read from this database version with the library: names,
// codes, location, postal code, subdivisions in order, and the traits.
func TestLocateKnownAddresses(t *testing.T) {
	db := openCity(t)
	type want struct {
		path []any
		v    any
	}
	cases := map[string][]want{
		"81.2.69.142": {
			{[]any{"city", "names", "en"}, "Gamlingay"},
			{[]any{"city", "geonameId"}, float64(2648899)},
			{[]any{"country", "names", "en"}, "United Kingdom"},
			{[]any{"country", "isoCode"}, "GB"},
			{[]any{"country", "isInEuropeanUnion"}, true},
			{[]any{"country", "names", "pt-BR"}, "Reino Unido"},
			{[]any{"continent", "names", "en"}, "Europe"},
			{[]any{"continent", "code"}, "EU"},
			{[]any{"postal", "code"}, "SG19"},
			{[]any{"location", "latitude"}, 52.1398},
			{[]any{"location", "longitude"}, -0.2399},
			{[]any{"location", "accuracyRadius"}, float64(100)},
			{[]any{"location", "timeZone"}, "Europe/London"},
			{[]any{"subdivisions", 0, "isoCode"}, "ENG"},
			{[]any{"subdivisions", 0, "names", "en"}, "England"},
			{[]any{"subdivisions", 1, "isoCode"}, "CAM"},
			{[]any{"subdivisions", 1, "names", "en"}, "Cambridgeshire"},
			{[]any{"traits", "ipAddress"}, "81.2.69.142"},
			{[]any{"traits", "network"}, "81.2.68.0/22"},
			{[]any{"traits", "isAnonymousProxy"}, false},
			{[]any{"registeredCountry", "isoCode"}, "GB"},
		},
		"13.106.122.3": { // the address PostHog's GeoIP plugin puts for 127.0.0.1
			{[]any{"city", "names", "en"}, "Sydney"},
			{[]any{"country", "isoCode"}, "AU"},
			{[]any{"continent", "code"}, "OC"},
			{[]any{"postal", "code"}, "2000"},
			{[]any{"subdivisions", 0, "isoCode"}, "NSW"},
			{[]any{"location", "timeZone"}, "Australia/Sydney"},
			{[]any{"registeredCountry", "isoCode"}, "US"},
			{[]any{"registeredCountry", "isInEuropeanUnion"}, false},
		},
		"2001:4860:4860::8888": {
			{[]any{"country", "isoCode"}, "US"},
			{[]any{"location", "timeZone"}, "America/Chicago"},
			{[]any{"traits", "network"}, "2001:4860:4800::/37"},
		},
	}
	for ip, wants := range cases {
		loc, ok := db.Locate(ip)
		if !ok {
			t.Fatalf("%s: not found", ip)
		}
		for _, w := range wants {
			if got := at(loc, w.path...); got != w.v {
				t.Errorf("%s %v = %#v, want %#v", ip, w.path, got, w.v)
			}
		}
	}
	// The shaping keeps every value of the record: each language's name,
	// as the library reads it.
	raw := rawRecord(t, db.Path(), "81.2.69.142")
	names := raw["country"].(map[string]any)["names"].(map[string]any)
	loc, _ := db.Locate("81.2.69.142")
	for lang, name := range names {
		if got := at(loc, "country", "names", lang); got != name {
			t.Errorf("country.names.%s = %#v, the record has %#v", lang, got, name)
		}
	}
}

// TestLocateModelShape: the model's fields, in its order, with the empty
// defaults of geoip2-node for a record without a city.
func TestLocateModelShape(t *testing.T) {
	db := openCity(t)
	loc, ok := db.Locate("8.8.8.8")
	if !ok {
		t.Fatal("8.8.8.8 not found")
	}
	if got, want := strings.Join(loc.Keys, ","), "continent,country,registeredCountry,traits,city,location,postal,subdivisions"; got != want {
		t.Errorf("keys %s, want %s", got, want)
	}
	for _, k := range []string{"city", "postal"} {
		if o, _ := at(loc, k).(Object); len(o.Keys) != 0 {
			t.Errorf("%s = %v, want an empty object", k, o)
		}
	}
	if s, ok := at(loc, "subdivisions").([]any); !ok || len(s) != 0 {
		t.Errorf("subdivisions = %#v, want an empty array", at(loc, "subdivisions"))
	}
	for _, k := range booleanTraits {
		if at(loc, "traits", k) != false {
			t.Errorf("traits.%s = %#v, want false", k, at(loc, "traits", k))
		}
	}
	// A located object's traits are its own: the cached record is not
	// changed by the next address of the same record.
	a, _ := db.Locate("8.8.4.4")
	b, _ := db.Locate("8.8.8.8")
	if at(a, "traits", "ipAddress") != "8.8.4.4" || at(b, "traits", "ipAddress") != "8.8.8.8" || at(loc, "traits", "ipAddress") != "8.8.8.8" {
		t.Errorf("traits shared between lookups: %v, %v", at(a, "traits", "ipAddress"), at(b, "traits", "ipAddress"))
	}
}

func TestLocateNothing(t *testing.T) {
	db := openCity(t)
	for _, ip := range []string{
		"10.0.0.1", "192.168.1.1", "127.0.0.1", "::1", "0.0.0.0", // private, loopback, reserved
		"", "not an ip", "1.2.3", "999.1.1.1", " 81.2.69.142", "81.2.69.142\n", "fe80::1%eth0",
		"81.2.69.142/24", strings.Repeat("1", MaxAddressLen+1), "::ffff:" + strings.Repeat("0", 200),
	} {
		if loc, ok := db.Locate(ip); ok {
			t.Errorf("Locate(%q) = %v, want nothing", ip, loc.Keys)
		}
	}
}

// TestOpenRefuses: a file that is no database, a truncated or damaged one,
// and a database of another type are refused at once, naming the file.
func TestOpenRefuses(t *testing.T) {
	city := testenv.GeoIPCity(t)
	whole, err := os.ReadFile(city)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A hundredth of the file overwritten: at 0.1% it is the search
	// tree, at 45% and 80% the data section.
	damaged := func(at float64) []byte {
		b := append([]byte(nil), whole...)
		from := int(at * float64(len(b)))
		for i := from; i < from+len(b)/100; i++ {
			b[i] = 0xff
		}
		return b
	}
	cases := map[string]string{
		"missing":   filepath.Join(dir, "missing.mmdb"),
		"text":      write("text.mmdb", []byte("this is not a database\n")),
		"empty":     write("empty.mmdb", nil),
		"truncated": write("truncated.mmdb", whole[:len(whole)/2]),
		"tail only": write("tail.mmdb", whole[len(whole)-20000:]),
		"tree":      write("tree.mmdb", damaged(0.001)),
		"data":      write("data.mmdb", damaged(0.45)),
		"data end":  write("dataend.mmdb", damaged(0.80)),
		"country":   filepath.Join(filepath.Dir(city), "GeoLite2-Country.mmdb"),
	}
	for name, p := range cases {
		db, err := Open(p)
		if err == nil {
			_ = db.Close()
			t.Errorf("%s: opened", name)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
		if name == "country" && !errors.Is(err, ErrNotCity) {
			t.Errorf("country: error %v, want ErrNotCity", err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestLocateDamagedUnprobed: damage too small for the probe to meet (a few
// hundred bytes of the tree) still answers every lookup, never a panic.
func TestLocateDamagedUnprobed(t *testing.T) {
	b, err := os.ReadFile(testenv.GeoIPCity(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1000; i < 1400; i++ {
		b[i] = 0xff
	}
	p := filepath.Join(t.TempDir(), "damaged.mmdb")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(p)
	if err != nil {
		t.Skipf("the probe met this damage too: %v", err)
	}
	defer db.Close()
	found := 0
	for i := range 20000 {
		for _, ip := range []string{fmt.Sprintf("%d.%d.%d.%d", 1+i%223, i%256, (i*7)%256, (i*13)%256), fmt.Sprintf("2%03x:%x::1", i%4096, i)} {
			if _, ok := db.Locate(ip); ok {
				found++
			}
		}
	}
	t.Logf("%d of 40000 lookups found a record", found)
}

// TestLocateConcurrentAndBounded: callers share one DB; the cache of
// decoded records stays within its bound however many records are met.
func TestLocateConcurrentAndBounded(t *testing.T) {
	db := openCity(t)
	want, _ := db.Locate("81.2.69.142")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				db.Locate(fmt.Sprintf("%d.%d.%d.1", 1+(g*5000+i)%223, i%256, (i/256)%256))
				if got, _ := db.Locate("81.2.69.142"); at(got, "city", "names", "en") != at(want, "city", "names", "en") {
					t.Errorf("concurrent Locate gave %v", at(got, "city", "names", "en"))
					return
				}
			}
		}()
	}
	wg.Wait()
	db.mu.Lock()
	n := len(db.cache)
	db.mu.Unlock()
	if n == 0 || n > cacheSize {
		t.Errorf("cache holds %d records, want 1..%d", n, cacheSize)
	}
}
