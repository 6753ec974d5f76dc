// Package jsonstyle rewrites a JSON document the ways other encoders write
// the same value: white space after separators (Python's json.dumps),
// indentation, a space before the colon, keys or strings written with
// escapes (PHP's json_encode escapes / and non-ASCII, Go's escapes <, >
// and &). Tests send one history in every style and expect the same
// answers: the events table keeps one canonical form of each
// (event.Canonical).
package jsonstyle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf16"
)

// Style is one way of writing JSON.
type Style struct {
	Name string
	// Write rewrites a valid JSON document in this style.
	Write func(doc []byte) []byte
}

// All are the styles, the compact one first.
var All = []Style{
	{"compact", func(doc []byte) []byte { return rewrite(doc, layout{}, nil, nil) }},
	{"spaced", func(doc []byte) []byte { return rewrite(doc, layout{comma: ", ", colon: ": "}, nil, nil) }},
	{"pretty", func(doc []byte) []byte { return rewrite(doc, layout{colon: ": ", indent: "  "}, nil, nil) }},
	{"space-before-colon", func(doc []byte) []byte { return rewrite(doc, layout{comma: " , ", colon: " : "}, nil, nil) }},
	{"escaped-keys", func(doc []byte) []byte { return rewrite(doc, layout{}, escapeAll, nil) }},
	{"escaped-strings", func(doc []byte) []byte {
		return rewrite(doc, layout{comma: ",\t", colon: ":\r\n"}, escapeSome, escapeSome)
	}},
}

// ByName is the style of that name; it panics for an unknown name.
func ByName(name string) Style {
	for _, s := range All {
		if s.Name == name {
			return s
		}
	}
	panic("jsonstyle: no style " + name)
}

// layout is the white space around tokens.
type layout struct {
	comma, colon string
	indent       string // "": on one line; else a newline and this per level
}

// rewrite writes doc token by token in the layout, keys through key and
// string values through str (nil: as written).
func rewrite(doc []byte, l layout, key, str func(string) string) []byte {
	var out bytes.Buffer
	depth := 0
	newline := func() {
		if l.indent != "" {
			out.WriteByte('\n')
			out.WriteString(string(bytes.Repeat([]byte(l.indent), depth)))
		}
	}
	for i := skip(doc, 0); i < len(doc); i = skip(doc, i) {
		switch c := doc[i]; c {
		case '{', '[':
			out.WriteByte(c)
			i++
			if j := skip(doc, i); j < len(doc) && (doc[j] == '}' || doc[j] == ']') {
				out.WriteByte(doc[j]) // empty: {} and [] stay on one line
				i = j + 1
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			out.WriteByte(c)
			i++
		case ',':
			out.WriteString(cond(l.comma, ","))
			newline()
			i++
		case ':':
			out.WriteString(cond(l.colon, ":"))
			i++
		case '"':
			end := stringEnd(doc, i)
			tok := doc[i:end]
			isKey := func() bool { j := skip(doc, end); return j < len(doc) && doc[j] == ':' }()
			switch {
			case isKey && key != nil:
				out.WriteString(key(decode(tok)))
			case !isKey && str != nil:
				out.WriteString(str(decode(tok)))
			default:
				out.Write(tok)
			}
			i = end
		default: // a number or a literal: as written
			j := i
			for j < len(doc) && !bytes.ContainsRune([]byte(" \t\r\n,:]}"), rune(doc[j])) {
				j++
			}
			out.Write(doc[i:j])
			i = j
		}
	}
	return out.Bytes()
}

func cond(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func skip(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\r' || doc[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index after the string token starting at doc[i].
func stringEnd(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(doc)
}

func decode(tok []byte) string {
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		panic(fmt.Sprintf("jsonstyle: %q is not a JSON string: %v", tok, err))
	}
	return s
}

// escapeAll writes every character as \uXXXX (a pair above U+FFFF).
func escapeAll(s string) string { return quote(s, func(rune) bool { return true }) }

// escapeSome writes what other encoders escape: / (PHP), <, > and & (Go,
// for HTML), non-ASCII (PHP, Python's ensure_ascii), and the control
// characters in capitals.
func escapeSome(s string) string {
	return quote(s, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '<' || r == '>' || r == '&' || r == '\'' })
}

func quote(s string, escape func(rune) bool) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '/':
			b.WriteString(`\/`)
		case escape(r):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, `\u%04X\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
