package propfilter

import "strings"

// Event property filters (Options.Events) use the person filters'
// grammar and operators, read from an events row: its properties column
// holds the event's JSON object. Each leaf is compiled as a person filter
// and its two reads are then rewritten (eventColumns):
//
//	property_values[indexOf(property_keys, ?)] -> the value as text, as
//	    ValueText renders it: strings unquoted, anything else its JSON
//	    text; '' when absent
//	has(property_keys, ?)                      -> visitParamHas(properties, ?)
//
// visitParam* reads the first occurrence of the key at any depth of the
// JSON text (ClickHouse 18.16 has no JSON parser), as the analysis routes'
// event filters do (docs/analysis.md).

// eventValueSQL is valueSQL over an events row; its four placeholders all
// take the key.
const eventValueSQL = "if(visitParamHas(properties, ?), if(substring(visitParamExtractRaw(properties, ?), 1, 1) = '\"', " +
	"visitParamExtractString(properties, ?), visitParamExtractRaw(properties, ?)), '')"

// eventColumns rewrites a person filter's reads to an events row's, with
// the arguments in the new placeholders' order. The compiled SQL holds
// no literal '?' (every value is an argument), so placeholders are found
// by scanning.
func eventColumns(f frag) frag {
	var b strings.Builder
	args := make([]any, 0, len(f.args))
	sql, next := f.sql, 0
	for len(sql) > 0 {
		switch {
		case strings.HasPrefix(sql, valueSQL):
			k := f.args[next]
			next++
			b.WriteString(eventValueSQL)
			args = append(args, k, k, k, k)
			sql = sql[len(valueSQL):]
		case strings.HasPrefix(sql, hasSQL):
			args = append(args, f.args[next])
			next++
			b.WriteString("visitParamHas(properties, ?)")
			sql = sql[len(hasSQL):]
		case sql[0] == '?':
			args = append(args, f.args[next])
			next++
			b.WriteByte('?')
			sql = sql[1:]
		default:
			b.WriteByte(sql[0])
			sql = sql[1:]
		}
	}
	return frag{sql: b.String(), args: args}
}
