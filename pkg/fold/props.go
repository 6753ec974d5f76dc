package fold

import (
	"fmt"
	"maps"

	"github.com/personhub/personhub/pkg/propjson"
	"github.com/personhub/personhub/pkg/proptime"
)

// Cached persons keep their properties as the stored JSON (personState);
// these are the two crossings between that form and the map the rules
// read. The map decoded from the JSON is the one the store's own decode
// gives (numbers exact), so folding from either form gives the same rows.

// props returns p's properties as a map the fold may change, decoding the
// stored form on first use since the last Flush. A change to the map must
// mark p dirty (touch), so Flush encodes it again; an unchanged map is
// simply dropped at Flush.
func (f *Folder) props(p *personState) map[string]any {
	if p.row.Properties != nil {
		return p.row.Properties
	}
	m, err := propjson.Decode(p.row.PropertiesJSON)
	if err != nil {
		// Apply returns it: the batch fails as a failed load would.
		if f.broken == nil {
			f.broken = fmt.Errorf("person %d: stored properties: %w", p.row.ID, err)
		}
		return map[string]any{}
	}
	p.row.Properties = m
	p.email, p.emailHad = m["email"]
	p.emailSeen = true
	f.decoded = append(f.decoded, p)
	return m
}

// times returns p's recorded moments (proptime) for the fold to read and
// change, decoding the stored form on first use since the last Flush. A
// change must mark p dirty (touch). Most persons have none: their stored
// form is "" and this costs nothing.
func (f *Folder) times(p *personState) *proptime.Times {
	if !p.timesRead {
		t, err := proptime.Decode(p.row.PropertyTimes)
		if err != nil && f.broken == nil {
			// Apply returns it: the batch fails as a failed load would.
			f.broken = fmt.Errorf("person %d: stored property times: %w", p.row.ID, err)
		}
		p.times, p.timesRead = t, true
	}
	return &p.times
}

// flushTimes puts p's decoded moments back in their stored form.
func (p *personState) flushTimes() {
	if p.timesRead {
		p.row.PropertyTimes = proptime.Encode(p.times)
		p.times, p.timesRead = nil, false
	}
}

// emailKept reports whether the row Flush hands out for p (its
// properties props) has the email of the row the store holds for p: the
// properties were not decoded since the last Flush (so they did not
// change), or the email decoded then equals props' (strings compared; any
// other value counts as changed). False for a person the store has no row
// of.
func emailKept(p *personState, decoded bool, props map[string]any) bool {
	if p.stored.IsZero() {
		return false
	}
	if !decoded {
		return true
	}
	if !p.emailSeen {
		return false
	}
	v, has := props["email"]
	if has != p.emailHad {
		return false
	}
	if !has {
		return true
	}
	a, ok := p.email.(string)
	b, ok2 := v.(string)
	return ok && ok2 && a == b
}

// forgetEmail drops what props noted of p's stored email.
func (p *personState) forgetEmail() {
	p.emailSeen, p.emailHad, p.email = false, false, nil
}

// storedProps puts a loaded row's properties in the stored form: a Loader
// may give the map (tests' in-memory store) instead of the JSON.
func storedProps(r *PersonRow) {
	switch {
	case r.Properties == nil:
	case r.PropertiesJSON != "":
		r.Properties = nil // the JSON is what the store holds
	default:
		if raw, _, err := propjson.Encode(nil, r.Properties); err == nil {
			r.PropertiesJSON, r.Properties = string(raw), nil
		}
		// Else the map stays current, and is never dropped (compact).
	}
}

// flushRow is the row Flush hands out for dirty person p, which p's state
// gives up its map to: the cache keeps the JSON (encoded here once, and
// written as it is by the store), the batch the map (for the rows'
// key/value arrays and emails).
func (f *Folder) flushRow(p *personState) PersonRow {
	p.flushTimes()
	row, props := p.row, p.row.Properties
	if props == nil {
		// Dirty for its ids alone: the store needs the map too.
		var err error
		if props, err = propjson.Decode(row.PropertiesJSON); err != nil {
			// Handed out as stored: the store's write fails on it
			// as its decode does, and the batch with it.
			return row
		}
	}
	row.Properties = props
	raw, _, err := propjson.Encode(f.encodeBuf[:0], props)
	f.encodeBuf = raw
	if err != nil {
		// Not encodable: the store says so when it writes the row; the
		// cache keeps a copy of the map, its only form.
		row.Properties, row.PropertiesJSON = maps.Clone(props), ""
		return row
	}
	row.PropertiesJSON = string(raw)
	p.row.Properties, p.row.PropertiesJSON = nil, row.PropertiesJSON
	return row
}

// compact drops the maps decoded since the last Flush of the persons that
// stayed clean: their stored form is still current. Called before the
// dirty ones are flushed (flushRow drops theirs).
func (f *Folder) compact() {
	for _, p := range f.decoded {
		if !p.dirty {
			p.row.Properties = nil
			p.forgetEmail()
			p.times, p.timesRead = nil, false // unchanged: the stored form is current
		}
	}
	clear(f.decoded)
	f.decoded = f.decoded[:0]
}
