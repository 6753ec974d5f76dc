package geoip

import (
	"math/big"
	"slices"
	"strings"
)

// The City model of @maxmind/geoip2-node, which PostHog's plugin server
// returns from meta.geoip.locate: the record's keys in camelCase (keys
// with a dash, the language codes of names such as pt-BR, stay as they
// are); its fields in the model's order; city, location and postal an
// empty object and subdivisions an empty array when the record has none;
// the boolean traits and registeredCountry.isInEuropeanUnion always
// present (false when absent). Other top-level keys of a record are not
// part of the model and are left out, as there. Inside a record the keys
// are sorted: a map's order is lost in decoding, and a sorted one is the
// same on every run.

// optional are the model's fields left out when the record has none; ensured
// are those that are an empty object then.
var (
	optional = []string{"continent", "country", "maxmind", "registeredCountry", "representedCountry"}
	ensured  = []string{"city", "location", "postal"}
)

// booleanTraits are the traits geoip2-node sets to false when absent.
var booleanTraits = []string{"isAnonymous", "isAnonymousProxy", "isAnonymousVpn", "isHostingProvider",
	"isLegitimateProxy", "isPublicProxy", "isResidentialProxy", "isSatelliteProvider", "isTorExitNode"}

// cityModel shapes a decoded record (nil: an empty one) as the City model.
func cityModel(raw map[string]any) Object {
	rec := map[string]any{}
	for k, v := range raw {
		rec[camel(k)] = value(v)
	}
	var out Object
	for _, k := range optional {
		if v, ok := rec[k]; ok {
			if k == "registeredCountry" {
				if o, ok := v.(Object); ok {
					v = withBool(o, "isInEuropeanUnion")
				}
			}
			out.set(k, v)
		}
	}
	traits, _ := rec["traits"].(Object)
	for _, k := range booleanTraits {
		traits = withBool(traits, k)
	}
	out.set("traits", traits)
	for _, k := range ensured {
		v, ok := rec[k]
		if !ok {
			v = Object{}
		}
		out.set(k, v)
	}
	subs, ok := rec["subdivisions"]
	if !ok {
		subs = []any{}
	}
	out.set("subdivisions", subs)
	return out
}

// withBool is o with key a boolean: its value's truth, false when absent.
func withBool(o Object, key string) Object {
	o = Object{Keys: slices.Clone(o.Keys), Values: slices.Clone(o.Values)}
	v, _ := o.Get(key)
	o.set(key, truthy(v))
	return o
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case nil:
		return false
	}
	return true
}

// value converts a decoded value: maps to Objects with camelCase keys in
// sorted order, every number to float64 (a JavaScript number); bytes,
// which no City record holds, are left out (nil).
func value(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var o Object
		for _, k := range keys {
			if c := value(x[k]); c != nil {
				o.set(camel(k), c)
			}
		}
		return o
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if c := value(e); c != nil {
				out = append(out, c)
			}
		}
		return out
	case string, bool, float64:
		return x
	case float32:
		return float64(x)
	case uint64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint16:
		return float64(x)
	case int:
		return float64(x)
	case int32:
		return float64(x)
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f
	}
	return nil
}

// camel is a snake_case key in camelCase (iso_code: isoCode); a key with a
// dash is kept, as geoip2-node keeps it.
func camel(k string) string {
	if strings.Contains(k, "-") || !strings.Contains(k, "_") {
		return k
	}
	parts := strings.Split(k, "_")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1:] {
		if p == "" {
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}
