package propfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueText renders a decoded JSON value the way it is stored in
// property_values:
//
//   - string: the raw text (no quotes, unescaped)
//   - json.Number: its text as received ("42", "1.50", "1e3")
//   - bool: "true" / "false"
//   - nil: "null"
//   - map[string]any, []any: compact JSON (encoding/json: object keys sorted,
//     no HTML escaping, nested json.Number kept as received)
//   - float64/float32: shortest JSON number text ("1.5", "1e+21"); NaN and
//     infinities, which JSON cannot carry, render as "NaN", "+Inf", "-Inf"
//   - Go integer types: decimal text
//
// Any other type is rendered as JSON when possible, otherwise with fmt.
func ValueText(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return floatText(x, 64)
	case float32:
		return floatText(float64(x), 32)
	case int:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func floatText(f float64, bits int) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, bits)
	}
	var b []byte
	var err error
	if bits == 32 {
		b, err = json.Marshal(float32(f))
	} else {
		b, err = json.Marshal(f)
	}
	if err != nil {
		return strconv.FormatFloat(f, 'g', -1, bits)
	}
	return string(b)
}
