package insight

import (
	"context"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/personhub/personhub/pkg/chstore/statement"
)

// sessionGap splits a person's events into sessions (reference §8).
const sessionGap = 30 * 60

// pathKey is a node of a path: its 1-based position and item.
type pathKey struct {
	pos  int
	item string
}

func parsePathKey(attr, s string) (*pathKey, error) {
	if s == "" {
		return nil, nil
	}
	i := strings.IndexByte(s, '_')
	n, err := strconv.Atoi(s[:max(i, 0)])
	if i < 0 || err != nil || n < 1 {
		return nil, invalidf(attr, "%s must be a node key \"<position>_<item>\" (position from 1), not %q.", attr, s)
	}
	return &pathKey{pos: n, item: s[i+1:]}, nil
}

// paths is the parsed parameters of /persons/path/.
type paths struct {
	types                 cond // which events make paths; "" all
	exclude               []string
	start, end            string
	stepLimit             int
	startKey, endKey, off *pathKey
	item                  cond // the SQL of an event's path item
	// names are the only event names types can match, nil when any (no
	// type, or custom_event): the scan then cuts by name in its PREWHERE
	// (scan.names), reading properties only for those rows.
	names []string
}

func parsePaths(q url.Values) (*paths, error) {
	p := &paths{start: q.Get("start_point"), end: q.Get("end_point")}
	var err error
	if p.stepLimit, err = intParam(q, "step_limit", 5, 1, 100); err != nil {
		return nil, err
	}
	if p.off, err = parsePathKey("path_dropoff_key", q.Get("path_dropoff_key")); err != nil {
		return nil, err
	}
	if p.startKey, err = parsePathKey("path_start_key", q.Get("path_start_key")); err != nil {
		return nil, err
	}
	if p.endKey, err = parsePathKey("path_end_key", q.Get("path_end_key")); err != nil {
		return nil, err
	}
	for _, name := range []string{"funnel_paths", "funnel_filter"} {
		if q.Get(name) != "" {
			return nil, invalidf(name, "Funnel paths are not supported.")
		}
	}
	if p.exclude, err = stringList(q, "exclude_events"); err != nil {
		return nil, err
	}
	types, err := stringList(q, "include_event_types")
	if err != nil {
		return nil, err
	}
	if t := q.Get("path_type"); t != "" && len(types) == 0 {
		types = []string{t} // the legacy single type
	}
	custom, err := stringList(q, "include_custom_events")
	if err != nil {
		return nil, err
	}
	var alts []cond
	anyName := len(types) == 0 && len(custom) == 0
	for _, t := range types {
		switch t {
		case "$pageview", "$screen":
			alts = append(alts, cond{"event = ?", []any{t}})
			p.names = append(p.names, t)
		case "custom_event":
			alts = append(alts, cond{"NOT startsWith(event, '$')", nil})
			anyName = true
		default:
			return nil, invalidf("include_event_types", "include_event_types may hold $pageview, $screen and custom_event, not %q.", t)
		}
	}
	if len(custom) > 0 {
		alts = append(alts, cond{"event IN (" + statement.Marks(len(custom)) + ")", statement.Args(custom)})
		p.names = append(p.names, custom...)
	}
	if anyName {
		p.names = nil
	}
	p.types = or(alts...)
	if p.item, err = pathItem(q); err != nil {
		return nil, err
	}
	return p, nil
}

// pathItem is the SQL of an event's path item: the URL without one
// trailing slash for $pageview, the screen name for $screen, else the
// event name; then the local cleaning rules and the first matching
// grouping. path_replacements names project rules, of which a project
// has none here, so it changes nothing.
func pathItem(q url.Values) (cond, error) {
	c := cond{"multiIf(event = '$pageview', replaceRegexpOne(visitParamExtractString(properties, '$current_url'), '/$', ''), " +
		"event = '$screen', visitParamExtractString(properties, '$screen_name'), event)", nil}
	if _, err := parseBool("path_replacements", q.Get("path_replacements")); err != nil {
		return cond{}, err
	}
	v, err := decodeJSON("local_path_cleaning_filters", q.Get("local_path_cleaning_filters"))
	if err != nil {
		return cond{}, err
	}
	rules, _ := v.([]any)
	if v != nil && rules == nil {
		return cond{}, invalidf("local_path_cleaning_filters", "local_path_cleaning_filters must be a JSON array of {\"alias\", \"regex\"}.")
	}
	for _, it := range rules {
		obj, _ := it.(map[string]any)
		re, ok1 := obj["regex"].(string)
		alias, ok2 := obj["alias"].(string)
		if _, err := regexp.Compile(re); !ok1 || !ok2 || err != nil {
			return cond{}, invalidf("local_path_cleaning_filters", "Each cleaning filter needs a valid regex and an alias.")
		}
		c = cond{"replaceRegexpAll(" + c.sql + ", ?, ?)", append(append([]any{}, c.args...), re, alias)}
	}
	groups, err := stringList(q, "path_groupings")
	if err != nil || len(groups) == 0 {
		return c, err
	}
	sql, args := "multiIf(", []any{}
	for _, g := range groups {
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(g), `\*`, ".*") + "$"
		sql += "match(" + c.sql + ", ?), ?, "
		args = append(append(append(args, c.args...), re), g)
	}
	return cond{sql + c.sql + ")", append(args, c.args...)}, nil
}

// stringList reads a JSON array of strings.
func stringList(q url.Values, name string) ([]string, error) {
	v, err := decodeJSON(name, q.Get(name))
	if err != nil || v == nil {
		return nil, err
	}
	list, ok := v.([]any)
	out := make([]string, 0, len(list))
	for _, it := range list {
		s, isStr := it.(string)
		if !isStr {
			ok = false
			break
		}
		out = append(out, s)
	}
	if !ok {
		return nil, invalidf(name, "%s must be a JSON array of strings.", name)
	}
	return out, nil
}

// Paths answers GET|POST /persons/path/: the persons who walked the edge
// path_start_key -> path_end_key (or left it, or entered it), or whose
// path ended at path_dropoff_key, or every person with a path; by person
// id (reference §8, §14.9: keys name nodes after step_limit truncation).
//
// Per person the events are sorted and cut into sessions at gaps of 30
// minutes (a running sum of gap flags, since 18.16 has no arraySplit);
// each session becomes one path: runs of one item collapsed to one,
// start_point/end_point applied, then step_limit.
func (st *Store) Paths(ctx context.Context, project uint64, f *Filter, q url.Values, page Page) ([]Actor, error) {
	p, err := parsePaths(q)
	if err != nil {
		return nil, err
	}
	s, err := st.match(ctx, project, f, Entity{Type: "events"})
	if err != nil {
		return nil, err
	}
	s.where = and(s.where, p.types)
	s.names = p.names
	if len(p.exclude) > 0 {
		s.where = and(s.where, cond{"event NOT IN (" + statement.Marks(len(p.exclude)) + ")", statement.Args(p.exclude)})
	}
	if p.anyPath() && len(p.exclude) == 0 {
		// Every person with an event in the scan: no item, no arrays;
		// a page from the persons up to an id (prefix.go).
		full := func() ([]Actor, error) {
			base, args := s.sql()
			lim, largs := page.sql()
			return st.actors(ctx, "SELECT pid FROM ("+base+") GROUP BY pid ORDER BY pid"+lim, append(args, largs...), false)
		}
		return st.prefixPage(ctx, project, page, func(upTo uint64) (string, []any) {
			cut := s
			cut.upTo = upTo
			base, args := cut.sql()
			return "SELECT pid, toUInt8(1) AS ok FROM (" + base + ") GROUP BY pid", args
		}, full)
	}
	s.extra = append(s.extra, cond{p.item.sql + " AS item", p.item.args})
	base, args := s.sql()
	var excl cond
	if len(p.exclude) > 0 {
		excl = cond{" WHERE item NOT IN (" + statement.Marks(len(p.exclude)) + ")", statement.Args(p.exclude)}
	}
	if p.anyPath() {
		// Every person with an event left after the items excluded.
		lim, largs := page.sql()
		return st.actors(ctx, "SELECT pid FROM (SELECT pid, item FROM ("+base+")"+excl.sql+") GROUP BY pid ORDER BY pid"+lim,
			append(append(args, excl.args...), largs...), false)
	}
	// Two arrays, items sorted by their times, not one array of (time,
	// item) tuples: a groupArray of tuples serializes every tuple into
	// the arena, ~1 s more per 2.4M events (docs/performance.md). The
	// same sort of the same keys: the same order, ties included.
	byPerson := "SELECT pid, groupArray(toUInt32(timestamp)) AS T, arraySort(T) AS ts, arraySort((x, t) -> t, groupArray(item), T) AS items " +
		"FROM (SELECT pid, timestamp, item FROM (" + base + ")" + excl.sql + ") GROUP BY pid"
	sessions := "SELECT pid, ts, items, " +
		"arrayCumSum(arrayMap(i -> toUInt32(i > 1 AND ts[i] >= ts[i - 1] + ?), arrayEnumerate(ts))) AS sid FROM (" + byPerson + ")"
	session := "SELECT pid, arrayFilter((x, k) -> k = s, items, sid) AS sess FROM (" + sessions +
		") ARRAY JOIN range(toUInt64(sid[length(sid)]) + 1) AS s"
	dedup := "SELECT pid, arrayFilter((x, i) -> i = length(sess) OR x != sess[i + 1], sess, arrayEnumerate(sess)) AS d FROM (" + session + ")"
	shaped, keep, match := p.shape(), p.keep(), p.match()
	sql := "SELECT pid FROM (SELECT pid, " + shaped.sql + " FROM (" + dedup + ") WHERE " + keep.sql + ") WHERE " + match.sql +
		" GROUP BY pid ORDER BY pid"
	lim, largs := page.sql()
	var all []any
	for _, part := range [][]any{shaped.args, {sessionGap}, args, excl.args, keep.args, match.args, largs} {
		all = append(all, part...)
	}
	return st.actors(ctx, sql+lim, all, false)
}

// anyPath: no key, start or end point, so every session is a path that
// puts its person in the answer; each person with an event has one (a
// session holds at least one event, and collapsing runs leaves one), so
// the answer is the persons with an event, without sessions or items.
func (p *paths) anyPath() bool {
	return p.off == nil && p.startKey == nil && p.endKey == nil && p.start == "" && p.end == ""
}

// keep: sessions without the start (end) point have no path.
func (p *paths) keep() cond {
	switch {
	case p.start != "" && p.end != "":
		return cond{"indexOf(d, ?) > 0 AND indexOf(arraySlice(d, indexOf(d, ?)), ?) > 0", []any{p.start, p.start, p.end}}
	case p.start != "":
		return cond{"indexOf(d, ?) > 0", []any{p.start}}
	case p.end != "":
		return cond{"indexOf(d, ?) > 0", []any{p.end}}
	}
	return cond{"length(d) > 0", nil}
}

// shape is the SELECT expressions ending in path: a session's items
// after start_point, end_point and step_limit (reference §8).
func (p *paths) shape() cond {
	l := p.stepLimit
	switch {
	case p.start != "" && p.end != "":
		// From the start point to the first end point after it; a longer
		// path keeps its first and last step_limit/2 items around "...".
		return cond{"arraySlice(d, indexOf(d, ?)) AS r, arraySlice(r, 1, indexOf(r, ?)) AS se, " +
			"if(length(se) > ?, arrayConcat(arraySlice(se, 1, ?), ['...'], arraySlice(se, length(se) - ? + 1, ?)), se) AS walk",
			[]any{p.start, p.end, l, l / 2, l / 2, l / 2}}
	case p.start != "":
		return cond{"arraySlice(d, indexOf(d, ?), ?) AS walk", []any{p.start, l}}
	case p.end != "":
		return cond{"indexOf(d, ?) AS e, arraySlice(d, greatest(1, toInt64(e) - ? + 1), least(e, ?)) AS walk", []any{p.end, l, l}}
	}
	return cond{"arraySlice(d, 1, ?) AS walk", []any{l}}
}

// match is the condition on a path that puts its person in the answer.
func (p *paths) match() cond {
	switch {
	case p.off != nil:
		return cond{"length(walk) = ? AND walk[?] = ?", []any{p.off.pos, p.off.pos, p.off.item}}
	case p.startKey != nil && p.endKey != nil:
		if p.endKey.pos != p.startKey.pos+1 {
			return cond{"0", nil} // not an edge: nodes are consecutive
		}
		return cond{"length(walk) >= ? AND walk[?] = ? AND walk[?] = ?", []any{p.endKey.pos, p.startKey.pos, p.startKey.item, p.endKey.pos, p.endKey.item}}
	case p.startKey != nil:
		return cond{"length(walk) > ? AND walk[?] = ?", []any{p.startKey.pos, p.startKey.pos, p.startKey.item}}
	case p.endKey != nil:
		if p.endKey.pos < 2 {
			return cond{"0", nil} // nothing enters the first node
		}
		return cond{"length(walk) >= ? AND walk[?] = ?", []any{p.endKey.pos, p.endKey.pos, p.endKey.item}}
	}
	return cond{"1", nil}
}
