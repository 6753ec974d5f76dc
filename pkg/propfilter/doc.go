// Package propfilter turns the `properties` query parameter of the persons
// list API (PostHog-compatible) into a ClickHouse WHERE fragment with
// positional `?` placeholders and an argument slice.
//
// # Storage model
//
// Each person row carries two parallel columns: property_keys Array(String)
// with the top-level property keys and property_values Array(String) with each
// value rendered by [ValueText]. A property's value is read with
//
//	property_values[indexOf(property_keys, ?)]   -- '' when the key is absent
//
// and its presence with has(property_keys, ?). Keys and values are always
// passed as arguments, never spliced into the SQL text. Arguments are only of
// type string or float64.
//
// # Input forms
//
// The parameter is a JSON document:
//
//   - An array of filters (implicit AND):
//     [{"key":"email","value":"x@y.z","operator":"exact","type":"person"}]
//   - A group, nested arbitrarily (up to [MaxDepth] levels):
//     {"type":"AND"|"OR","values":[ filters or groups ]}.
//     An object is a group when its "type" is "AND" or "OR" (any case), or
//     when it has "values" but neither "type" nor "key" (then it is an AND).
//   - A legacy dict: {"email__icontains":"x","name":"bob"}. Each entry is a
//     filter; the key is split at its last "__" into property key and
//     operator (no "__" means exact). An unknown suffix is an error, so a
//     property whose name contains "__" is written with an explicit operator,
//     e.g. "utm__source__exact". Entries are processed in sorted key order.
//   - Empty (or blank) string, null, [] and {}: no constraint.
//
// A top-level object that is not a group is a legacy dict (as in PostHog), so
// a single bare filter object must be wrapped in an array.
//
// [ParseWith] compiles two more types through the caller's [Options]:
// "cohort" ({"key":"id","value":N}, via a [CohortResolver]; an unknown
// cohort is an *Error) and "behavioral" (cohort definitions). "negation":
// true negates any filter.
//
// Other filters whose "type" is not "person" (event, element, ..., and
// cohort/behavioral without options) are ignored without further validation: they are dropped from
// their group. A group left empty is dropped from its parent, and an empty
// top level means no constraint. So an OR of a person filter and an event filter
// constrains by the person filter only. A missing, null or "" type means person.
// A missing or null operator, or "", means exact.
// At most [MaxFilters] filters (ignored ones included) are accepted.
//
// # Operators
//
// V is the value expression above, P the presence expression.
//
//   - exact (default), is_not. A string s gives V = s ("" also requires P).
//     A number n gives toFloat64OrNull(V) = n. A bool gives V = 'true'/'false'.
//     null matches persons without the key or with a JSON null
//     (NOT P OR V = 'null'). An object or array compares its ValueText. A
//     string that is the JSON text of an object or array matches either that
//     text or the ValueText of what it decodes to (V IN (s, canonical)), so
//     `"{\"a\": 1}"` finds the stored object {"a":1} as PostHog does. A list
//     means any of its elements (V IN (...) when all are non-empty strings;
//     an empty list matches nobody). is_not is the exact negation, so persons
//     lacking the key match it.
//   - icontains, not_icontains: positionCaseInsensitiveUTF8(V, text) > 0,
//     with text = ValueText(value).
//   - regex, not_regex: P AND match(V, pattern). The pattern must compile
//     with Go's regexp (RE2 syntax) and must not hold a literal NUL (raw, or
//     escaped as \x00, \x{0}, \000): ClickHouse 18.16 cuts such patterns at
//     the NUL in some code paths, so "\x00" matched every string, the empty
//     one of absent keys included. A class holding NUL ([\x00-\x1f]) works.
//     ClickHouse 18.16 also ignores (?i) when the pattern has a literal part
//     ("(?i)ALICE" does not match "alice"); write [Aa][Ll]... there.
//   - gt, gte, lt, lte: numeric (toFloat64OrNull(V) > n) when the value is a
//     number or a string that parses as a finite float. Otherwise a byte-wise
//     string comparison (V > s). Non-numeric stored values never match a
//     numeric comparison.
//   - is_set: P. is_not_set: NOT P. The value is ignored.
//   - is_date_exact, is_date_after, is_date_before: the value is a date
//     ("2024-01-02") or datetime (RFC 3339, "2024-01-02 03:04:05",
//     "2024-01-02T03:04:05", optionally with fraction/offset; no offset means
//     UTC), or a relative date as PostHog writes them: "-7d", "7d", "24h",
//     "2w", "3m" (months), "1y" (hour, day, week, month, year; the minus is
//     optional, both count back from Options.Now), between 1970-01-01 and
//     2105-12-31. Stored values are parsed with
//     parseDateTimeBestEffortOrNull(V, 'UTC'). Exact compares the UTC day,
//     after/before compare datetimes strictly, at whole-second precision.
//     Stored values that are not dates never match, and neither do
//     persons lacking the key or holding the empty string: the operators
//     also require V to be non-empty (ClickHouse 18.16 parses the empty
//     string as 2000-01-01 00:00:00, current releases as NULL). Negated
//     ("negation": true), they match those persons, as every negation is
//     the exact logical one. Which other stored texts are dates is the
//     parser's answer, and it differs between versions for partial ones:
//     a blank, a bare number or month name ("5", "Jan") reads as a day of
//     2000 on 18.16, and as NULL or a day of the current year on current
//     releases.
//
// Positive operators never match a person lacking the key. Where the SQL
// predicate would also be true for the empty string that an absent key yields
// (exact "", icontains "", lt/lte strings), P is added; regex always has it,
// so no disagreement between Go's and ClickHouse's regex engines about ""
// can select persons lacking the key; the date operators require V to be
// non-empty. toFloat64OrNull of the empty string is NULL on 18.16 and
// current releases alike, so the numeric comparisons need no such test.
// The negated operators (is_not, not_icontains, not_regex) are exact
// logical negations, so persons lacking the key match them (PostHog behaviour).
//
// # NULL handling
//
// Every leaf predicate is NULL-free. ClickHouse before 19.x propagates a NULL
// operand through AND, OR and NOT (so NULL OR 1 is NULL). The comparisons on
// toFloat64OrNull/parseDateTimeBestEffortOrNull are therefore wrapped as
// ifNull(cmp, 0), which behaves the same on 18.16 and 24.x.
//
// Malformed input yields an *[Error] whose Detail describes the problem.
package propfilter
