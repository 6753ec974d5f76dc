// Package geoip answers where an IP address is, from a MaxMind-format City
// database (GeoLite2-City, GeoIP2-City), in the shape PostHog's plugin
// server gives a plugin's meta.geoip.locate: the City model of MaxMind's
// Node library (@maxmind/geoip2-node), whose keys are the database's in
// camelCase (country.isoCode, location.timeZone, ...). See docs/plugins.md,
// "meta.geoip".
//
// The file is opened once per process (memory-mapped, read-only) and
// shared by every caller; decoded records are cached by their place in the
// file, a bounded number of them.
package geoip

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oschwald/maxminddb-golang"
)

// MaxAddressLen bounds the text Locate parses: the longest IPv6 address
// written out (with an IPv4 tail) is 45 characters.
const MaxAddressLen = 64

// cacheSize bounds the decoded records kept. A City database's records are
// shared by many networks (every address of a city points at one), so a
// few thousand cover most traffic; a full cache is emptied, not evicted by
// age, which bounds it without bookkeeping per hit.
const cacheSize = 4096

// DB is an open City database. Safe for concurrent use.
type DB struct {
	path   string
	reader *maxminddb.Reader
	mu     sync.Mutex
	cache  map[uintptr]Object
}

// Object is a record's map with its keys in a fixed order (a replay must
// build the same JavaScript object, key order included). Values are
// Object, []any, string, float64 or bool. A DB's objects are shared by its
// callers and never changed after Locate returns them.
type Object struct {
	Keys   []string
	Values []any
}

// Get returns the value at key.
func (o Object) Get(key string) (any, bool) {
	if i := slices.Index(o.Keys, key); i >= 0 {
		return o.Values[i], true
	}
	return nil, false
}

func (o *Object) set(key string, v any) {
	if i := slices.Index(o.Keys, key); i >= 0 {
		o.Values[i] = v
		return
	}
	o.Keys = append(o.Keys, key)
	o.Values = append(o.Values, v)
}

// ErrNotCity is a database of another kind than City: PostHog's reader
// refuses such a database for locate too (its city() checks the type).
var ErrNotCity = errors.New("not a MaxMind City database")

// Open maps the database at path and checks it, so that a file that is no
// database, a truncated one or one of another type is refused at start,
// naming the path, rather than failing lookups one event at a time: the
// reader reads the metadata, and probe looks up and decodes a spread of
// addresses. (The library's full Verify walks every record: 10 to 30 s for
// GeoLite2 City, too slow for every start.) A record damaged where no
// probe reaches answers as not found, never a panic (Locate).
func Open(path string) (*DB, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("geoip database %s: %w", path, err)
	}
	if t := r.Metadata.DatabaseType; !strings.Contains(t, "City") {
		_ = r.Close()
		return nil, fmt.Errorf("geoip database %s is of type %q: %w (GeoLite2-City or GeoIP2-City)", path, t, ErrNotCity)
	}
	d := &DB{path: path, reader: r, cache: map[uintptr]Object{}}
	if err := d.probe(); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("geoip database %s is corrupt: %w", path, err)
	}
	return d, nil
}

// probe looks up 4096 IPv4 addresses spread over the whole space (and as
// many IPv6 ones in an IPv6 database), decoding each record found, and
// answers the first error. Nothing is cached.
func (d *DB) probe() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reading a record panicked: %v", p)
		}
	}()
	ips := make([]net.IP, 0, 8192)
	for i := range uint32(4096) {
		// Multiplying by an odd constant spreads consecutive i over the
		// high bits, where the tree branches first.
		v := i * 0x9E3779B1
		ips = append(ips, net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).To4())
		if d.reader.Metadata.IPVersion == 6 {
			ip := make(net.IP, 16)
			ip[0], ip[1], ip[2], ip[3] = 0x20|byte(v>>29), byte(v>>16), byte(v>>8), byte(v)
			ips = append(ips, ip)
		}
	}
	found := 0
	for _, ip := range ips {
		off, err := d.reader.LookupOffset(ip)
		if err != nil {
			return err
		}
		if off == maxminddb.NotFound {
			continue
		}
		var raw any
		if err := d.reader.Decode(off, &raw); err != nil {
			return err
		}
		if _, ok := raw.(map[string]any); !ok {
			return fmt.Errorf("the record of %s is a %T, not a map", ip, raw)
		}
		found++
	}
	if found == 0 {
		return errors.New("no address of the probe has a record")
	}
	return nil
}

// Close unmaps the file (nil: none to close). No Locate may run during or
// after it.
func (d *DB) Close() error {
	if d == nil {
		return nil
	}
	return d.reader.Close()
}

// Path is the file the database was opened from.
func (d *DB) Path() string { return d.path }

// Type is the database's type, e.g. GeoLite2-City.
func (d *DB) Type() string { return d.reader.Metadata.DatabaseType }

// Built is when the database was built (its metadata's build epoch).
func (d *DB) Built() time.Time { return time.Unix(int64(d.reader.Metadata.BuildEpoch), 0).UTC() }

// Locate returns the City model of ip, as PostHog's plugin server returns
// it, and false when ip is not an IP address (or longer than
// MaxAddressLen, or has a zone) or the database holds nothing for it
// (private and reserved ranges, for one). traits.ipAddress is ip as given
// and traits.network the database's network that holds it.
func (d *DB) Locate(ip string) (loc Object, ok bool) {
	if len(ip) > MaxAddressLen {
		return Object{}, false
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Zone() != "" {
		return Object{}, false
	}
	// The reader checks its bounds and answers errors for a bad record;
	// a panic would still only cost this lookup, not the process.
	defer func() {
		if recover() != nil {
			loc, ok = Object{}, false
		}
	}()
	nip := net.IP(addr.AsSlice())
	var none struct{} // decodes nothing: only the network is wanted here
	network, found, err := d.reader.LookupNetwork(nip, &none)
	if err != nil || !found {
		return Object{}, false
	}
	off, err := d.reader.LookupOffset(nip)
	if err != nil || off == maxminddb.NotFound {
		return Object{}, false
	}
	rec, err := d.record(off)
	if err != nil {
		return Object{}, false
	}
	return withTraits(rec, ip, network.String()), true
}

// record is the City model of the record at off, minus the traits that
// depend on the address looked up.
func (d *DB) record(off uintptr) (Object, error) {
	d.mu.Lock()
	rec, hit := d.cache[off]
	d.mu.Unlock()
	if hit {
		return rec, nil
	}
	var raw any
	if err := d.reader.Decode(off, &raw); err != nil {
		return Object{}, err
	}
	m, _ := raw.(map[string]any)
	rec = cityModel(m)
	d.mu.Lock()
	if len(d.cache) >= cacheSize {
		clear(d.cache)
	}
	d.cache[off] = rec
	d.mu.Unlock()
	return rec, nil
}

// withTraits copies the top level and traits of a cached record (the rest
// is shared) and adds the address and its network, as geoip2-node's
// ReaderModel does.
func withTraits(rec Object, ip, network string) Object {
	out := Object{Keys: slices.Clone(rec.Keys), Values: slices.Clone(rec.Values)}
	t, _ := out.Get("traits")
	traits, _ := t.(Object)
	traits = Object{Keys: slices.Clip(slices.Clone(traits.Keys)), Values: slices.Clip(slices.Clone(traits.Values))}
	traits.set("ipAddress", ip)
	traits.set("network", network)
	out.set("traits", traits)
	return out
}
