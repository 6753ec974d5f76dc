package propfilter

import (
	"encoding/json"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// valueSQL yields the stored text of a property ('' when absent).
	valueSQL = "property_values[indexOf(property_keys, ?)]"
	// hasSQL is true when the person has the property.
	hasSQL = "has(property_keys, ?)"
	// dateSQL parses the stored text as a UTC datetime (NULL if not a date).
	dateSQL = "parseDateTimeBestEffortOrNull(" + valueSQL + ", 'UTC')"
	// numSQL parses the stored text as a number (NULL if not numeric).
	numSQL = "toFloat64OrNull(" + valueSQL + ")"
)

var operators = map[string]bool{
	"exact": true, "is_not": true,
	"icontains": true, "not_icontains": true,
	"regex": true, "not_regex": true,
	"gt": true, "gte": true, "lt": true, "lte": true,
	"is_set": true, "is_not_set": true,
	"is_date_exact": true, "is_date_after": true, "is_date_before": true,
}

var comparisons = map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

// leaf compiles one person-property filter and records its key.
func (p *parser) leaf(key, op string, value any) (frag, error) {
	if !operators[op] {
		return frag{}, errorf("unknown operator %q", op)
	}
	if list, ok := value.([]any); ok {
		switch op {
		case "exact", "is_not", "is_set", "is_not_set":
		default:
			return frag{}, errorf("operator %q does not accept a list value", op)
		}
		if len(list) > MaxListValues {
			return frag{}, errorf("too many values in list (at most %d)", MaxListValues)
		}
	}
	var f frag
	var err error
	switch op {
	case "exact":
		f, err = exact(key, value)
	case "is_not":
		f, err = exact(key, value)
		f = not(f)
	case "icontains", "not_icontains":
		text := ValueText(value)
		f = frag{"(positionCaseInsensitiveUTF8(" + valueSQL + ", ?) > 0)", []any{key, text}}
		f = presentIf(text == "", key, f)
		if op == "not_icontains" {
			f = not(f)
		}
	case "regex", "not_regex":
		f, err = regex(key, ValueText(value))
		if op == "not_regex" {
			f = not(f)
		}
	case "gt", "gte", "lt", "lte":
		f, err = compare(key, op, value)
	case "is_set":
		f = present(key)
	case "is_not_set":
		f = not(present(key))
	default: // is_date_*
		f, err = date(key, op, value, p.now)
	}
	if err != nil {
		return frag{}, err
	}
	p.keys[key] = struct{}{}
	return f, nil
}

// nullFalse maps a Nullable(UInt8) predicate to UInt8 with NULL as false, so
// that NOT/AND/OR behave the same on ClickHouse 18.16 (NULL-propagating
// logical functions) and 24.x.
func nullFalse(pred string) string { return "ifNull(" + pred + ", 0)" }

func present(key string) frag { return frag{hasSQL, []any{key}} }

func not(f frag) frag { return frag{"(NOT " + f.sql + ")", f.args} }

// presentIf prefixes f with the presence test when cond holds, i.e. when f
// alone would also be true for the empty string an absent key yields.
func presentIf(cond bool, key string, f frag) frag {
	if !cond {
		return f
	}
	return combine("AND", []frag{present(key), f})
}

func textEq(key, text string) frag {
	return presentIf(text == "", key, frag{"(" + valueSQL + " = ?)", []any{key, text}})
}

func numCmp(key, sym string, n float64) frag {
	return frag{nullFalse(numSQL + " " + sym + " ?"), []any{key, n}}
}

// exact compiles the exact operator for a scalar, object or list value.
func exact(key string, value any) (frag, error) {
	list, ok := value.([]any)
	if !ok {
		return exactOne(key, value)
	}
	switch len(list) {
	case 0:
		return frag{"(1 = 0)", nil}, nil
	case 1:
		return exactOne(key, list[0])
	}
	allText := true
	for _, el := range list {
		if s, ok := el.(string); !ok || s == "" {
			allText = false
			break
		}
	}
	if allText {
		args := []any{key}
		for _, el := range list {
			for _, form := range textForms(el.(string)) {
				args = append(args, form)
			}
		}
		return textIn(args), nil
	}
	parts := make([]frag, 0, len(list))
	for _, el := range list {
		f, err := exactOne(key, el)
		if err != nil {
			return frag{}, err
		}
		parts = append(parts, f)
	}
	return combine("OR", parts), nil
}

func exactOne(key string, value any) (frag, error) {
	switch v := value.(type) {
	case nil:
		return combine("OR", []frag{not(present(key)), textEq(key, "null")}), nil
	case json.Number:
		n, err := number(v)
		if err != nil {
			return frag{}, err
		}
		return numCmp(key, "=", n), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return frag{}, errorf("number %v is out of range", v)
		}
		return numCmp(key, "=", v), nil
	case string:
		if forms := textForms(v); len(forms) > 1 {
			return textIn(append([]any{key}, forms[0], forms[1])), nil
		}
		return textEq(key, v), nil
	default: // bool, object, nested array
		return textEq(key, ValueText(v)), nil
	}
}

// textIn is V IN (...) over args = key, then the texts (none empty).
func textIn(args []any) frag {
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)-1), ", ")
	return frag{"(" + valueSQL + " IN (" + marks + "))", args}
}

// textForms returns the stored texts a string filter value matches: the
// string itself and, when it is the JSON text of an object or array (as a
// client sends a structured value, e.g. Python's json.dumps with its
// spaces), that value's stored rendering ValueText, so it matches the
// stored object or array as PostHog compares JSON values.
func textForms(s string) []string {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return []string{s}
	}
	v, err := decode(t)
	if err != nil {
		return []string{s}
	}
	switch v.(type) {
	case map[string]any, []any:
		if canon := ValueText(v); canon != s {
			return []string{s, canon}
		}
	}
	return []string{s}
}

func number(n json.Number) (float64, error) {
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errorf("number %s is out of range", n.String())
	}
	return f, nil
}

// numericText matches decimal number strings (optional sign, fraction and
// exponent), i.e. no "inf", "nan", hex or underscores.
var numericText = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// numericString reports whether s is a finite decimal number.
func numericString(s string) (float64, bool) {
	if !numericText.MatchString(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// regex compiles regex and not_regex (before negation). The pattern must
// compile with Go's regexp (RE2 syntax, as ClickHouse's match) and must not
// hold a NUL character, raw or escaped: ClickHouse (18.16 at least) cuts
// patterns and subjects at a NUL in some of match()'s code paths, so "\x00"
// would match every string, the empty one of absent keys included.
//
// The presence test is always added, rather than only when Go says the
// pattern matches "": a regex must never select a person lacking the key,
// even where ClickHouse's regex engine and Go's disagree.
func regex(key, pattern string) (frag, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return frag{}, errorf("invalid regex %q: %v", pattern, err)
	}
	// Compile parsed it with the same flags, so this cannot fail.
	if re, err := syntax.Parse(pattern, syntax.Perl); err != nil || literalNUL(re) {
		return frag{}, errorf("regex %q matches a NUL character, which ClickHouse cannot match reliably", pattern)
	}
	f := frag{"match(" + valueSQL + ", ?)", []any{key, pattern}}
	return combine("AND", []frag{present(key), f}), nil
}

// literalNUL reports whether the parsed regex holds a literal NUL (written
// raw, or as \x00, \x{0}, \000, inside \Q...\E, ...).
func literalNUL(re *syntax.Regexp) bool {
	if re.Op == syntax.OpLiteral && slices.Contains(re.Rune, 0) {
		return true
	}
	return slices.ContainsFunc(re.Sub, literalNUL)
}

func compare(key, op string, value any) (frag, error) {
	sym := comparisons[op]
	switch v := value.(type) {
	case json.Number:
		n, err := number(v)
		if err != nil {
			return frag{}, err
		}
		return numCmp(key, sym, n), nil
	case string:
		if n, ok := numericString(v); ok {
			return numCmp(key, sym, n), nil
		}
		// Would '' (absent key) satisfy the string comparison?
		var empty bool
		switch op {
		case "gte":
			empty = v == ""
		case "lt":
			empty = v != ""
		case "lte":
			empty = true
		}
		f := frag{"(" + valueSQL + " " + sym + " ?)", []any{key, v}}
		return presentIf(empty, key, f), nil
	default:
		return frag{}, errorf("operator %q needs a number or string value, not %s", op, kind(value))
	}
}

// Supported DateTime range (ClickHouse DateTime is an unsigned 32-bit
// timestamp; stay within it on both 18.16 and 24.x).
var (
	minDate = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDate = time.Date(2105, 12, 31, 23, 59, 59, 0, time.UTC)
)

var dateLayouts = []string{
	"2006-01-02",
	time.RFC3339, // fractional seconds are accepted when parsing
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
}

// parseDate parses a date or datetime; values without an offset are UTC.
func parseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// relativeDate matches PostHog's relative dates: a count and a unit (hour,
// day, week, month, year), with an optional leading minus; both "-7d" and
// "7d" mean seven days before now.
var relativeDate = regexp.MustCompile(`^-?([0-9]{1,6})([hdwmy])$`)

// RelativeDate reads a relative date ("-7d", "24h", "3m", ...) against
// now; ok is false for anything else.
func RelativeDate(s string, now time.Time) (t time.Time, ok bool) {
	m := relativeDate.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.Time{}, false
	}
	n, _ := strconv.Atoi(m[1]) // at most six digits
	switch m[2] {
	case "h":
		return now.Add(-time.Duration(n) * time.Hour), true
	case "d":
		return now.AddDate(0, 0, -n), true
	case "w":
		return now.AddDate(0, 0, -7*n), true
	case "m":
		return now.AddDate(0, -n, 0), true
	default: // y
		return now.AddDate(-n, 0, 0), true
	}
}

func date(key, op string, value any, now func() time.Time) (frag, error) {
	s, ok := value.(string)
	if !ok {
		return frag{}, errorf("operator %q needs a date string value, not %s", op, kind(value))
	}
	t, ok := parseDate(s)
	if !ok {
		t, ok = RelativeDate(s, now().UTC())
	}
	if !ok {
		return frag{}, errorf("invalid date %q (a date, a date-time, or relative like -7d, 24h, 3m, 1y)", s)
	}
	switch op {
	case "is_date_after": // stored > t  <=>  stored > floor(t), at 1s precision
		t = t.Truncate(time.Second)
	case "is_date_before": // stored < t  <=>  stored < ceil(t)
		if t2 := t.Truncate(time.Second); !t2.Equal(t) {
			t = t2.Add(time.Second)
		}
	}
	if t.Before(minDate) || t.After(maxDate) {
		return frag{}, errorf("date %q is out of range (1970-01-01 to 2105-12-31)", s)
	}
	var cmp frag
	switch op {
	case "is_date_exact":
		cmp = frag{nullFalse("toDate(" + dateSQL + ") = toDate(?)"), []any{key, t.Format("2006-01-02")}}
	case "is_date_after":
		cmp = frag{nullFalse(dateSQL + " > toDateTime(?, 'UTC')"), []any{key, t.Format(time.DateTime)}}
	default:
		cmp = frag{nullFalse(dateSQL + " < toDateTime(?, 'UTC')"), []any{key, t.Format(time.DateTime)}}
	}
	return combine("AND", []frag{nonEmpty(key), cmp}), nil
}

// nonEmpty is true when the stored text is not empty (so the key is
// present). The date operators require it: ClickHouse 18.16 parses the
// empty string as 2000-01-01 00:00:00 where current releases answer NULL,
// so without it is_date_before would match, on 18.16, the persons lacking
// the property.
func nonEmpty(key string) frag { return frag{"(" + valueSQL + " != '')", []any{key}} }
