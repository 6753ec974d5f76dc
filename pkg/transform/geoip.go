package transform

import (
	"github.com/dop251/goja"

	"github.com/personhub/personhub/pkg/geoip"
)

// geoipMeta is meta.geoip: locate(ip) answers the City model of ip from
// db (geoip.DB.Locate), or null when db is nil, ip is not a string, or the
// database has nothing for it; it never throws. It answers a plain value,
// not a promise: PostHog's current legacy transformations call it without
// await (`const response = geoip.locate(ip)`), older plugins with await,
// and awaiting a plain value gives that value, so both read the same
// object. Each call builds a fresh object: a plugin may change what it got
// without touching the shared record or another call's answer.
func (in *instance) geoipMeta(db *geoip.DB) *goja.Object {
	o := in.vm.NewObject()
	_ = o.Set("locate", func(c goja.FunctionCall) goja.Value {
		ip, ok := c.Argument(0).Export().(string)
		if !ok || db == nil {
			return goja.Null()
		}
		loc, ok := db.Locate(ip)
		if !ok {
			return goja.Null()
		}
		return in.geoValue(loc)
	})
	return o
}

// geoValue builds a located value in the runtime: objects with their keys
// in the order given (a __proto__ key defined as an own property, never
// reaching the prototype; Set for the others, a quarter cheaper), arrays,
// strings, numbers, booleans.
func (in *instance) geoValue(v any) goja.Value {
	switch x := v.(type) {
	case geoip.Object:
		o := in.vm.NewObject()
		for i, k := range x.Keys {
			if k == "__proto__" {
				_ = o.DefineDataProperty(k, in.geoValue(x.Values[i]), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
				continue
			}
			_ = o.Set(k, in.geoValue(x.Values[i]))
		}
		return o
	case []any:
		items := make([]any, len(x))
		for i, e := range x {
			items[i] = in.geoValue(e)
		}
		return in.vm.NewArray(items...)
	}
	return in.vm.ToValue(v)
}
