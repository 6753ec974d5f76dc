package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The canonical form of an event's properties, as the events table keeps
// them. ClickHouse reads properties as text (visitParamHas,
// visitParamExtractRaw/String match `"key":` byte for byte), so the same
// properties must be the same text whichever client wrote them: Python's
// json.dumps puts a space after each colon, curl bodies are indented, a
// key may be written with escapes ("\u0024browser").
//
// Canonical JSON here is:
//   - no white space between tokens;
//   - object members in the order written; a key repeated in one object
//     keeps its last value (the one decoders keep: encoding/json,
//     JSON.parse, json.loads; ClickHouse would read the first), at its
//     last place;
//   - numbers, true, false and null exactly as written (1.50 stays 1.50);
//   - strings and keys unescaped wherever JSON allows: only the quote, the
//     backslash and control characters stay escaped (\b \f \n \r \t, else
//     \u00xx in lower case); \/ is /, other \u escapes are their UTF-8
//     (<, > and & as themselves: no HTML escaping); a surrogate escape
//     without its pair and each byte that is not valid UTF-8 become U+FFFD,
//     as encoding/json decodes them.
//
// Canonical reads its input once, front to back, and copies only where the
// text changes: input already canonical (Go's and JavaScript's encoders
// write it, save for their escapes) comes back as it is, without a copy.
// Time and memory are linear in the input; nesting is bounded by
// CanonicalMaxDepth.

// CanonicalMaxDepth bounds nesting: encoding/json's own bound, so every
// properties object an envelope can hold is within it.
const CanonicalMaxDepth = 10000

// errCanonicalDepth: input nested beyond CanonicalMaxDepth.
var errCanonicalDepth = errors.New("json: nested deeper than 10000")

// Canonical returns the canonical form of the JSON value raw (white space
// around it allowed). The result shares raw's memory when raw holds it
// already; otherwise it is new. An error says raw is not JSON (or is
// nested too deep); nothing is returned then.
func Canonical(raw []byte) ([]byte, error) {
	c := canonicalPool.Get().(*canonicalizer)
	out, err := c.run(raw)
	c.release()
	return out, err
}

var canonicalPool = sync.Pool{New: func() any {
	return &canonicalizer{seed: maphash.MakeSeed(), slots: make([]uint64, 64)}
}}

// canonicalizer holds one run's state. Output positions are "virtual":
// the output is out followed by src[pend:], the part of the input that
// needs no change so far. A change flushes src[pend:i] to out, appends the
// replacement and moves pend past what it replaced.
type canonicalizer struct {
	src   []byte
	out   []byte
	pend  int
	dirty bool // out holds the output's start (a change was made)

	// Repeated keys: every member of the objects read so far, found by
	// key in slots (open addressing; an entry is gen<<32 | index+1, so a
	// new run or a growth empties the table by moving to the next gen).
	members []member
	slots   []uint64
	mask    int
	used    int
	gen     uint32
	objects int
	seed    maphash.Seed
	// holes are the output spans of members a later repeat replaced,
	// cut out at the end (a member inside a hole may have one too).
	holes []span
}

func (c *canonicalizer) release() {
	c.src, c.out = nil, nil
	// A document with many keys leaves its large buffers to the GC.
	if cap(c.members) > 1<<12 {
		c.members = nil
	}
	if len(c.slots) > 1<<13 {
		c.slots = make([]uint64, 64)
	}
	c.holes = c.holes[:0]
	canonicalPool.Put(c)
}

func (c *canonicalizer) run(src []byte) ([]byte, error) {
	c.src, c.out, c.dirty = src, nil, false
	c.members, c.holes, c.objects = c.members[:0], c.holes[:0], 0
	// About one key per 16 bytes, at most half the slots taken: a
	// table that does not grow for the common event.
	c.newTable(max(64, min(1<<13, pow2(len(src)/8))) - 1)
	c.pend = skipSpace(src, 0) // white space before the value: not output
	end, err := c.value(c.pend, 0)
	if err != nil {
		return nil, err
	}
	if i := skipSpace(src, end); i != len(src) {
		return nil, syntaxError(i, "after the value")
	}
	if !c.dirty && len(c.holes) == 0 {
		return src[c.pend:end], nil
	}
	c.out = append(c.out, src[c.pend:end]...)
	c.cutHoles()
	return c.out, nil
}

func syntaxError(i int, what string) error {
	return fmt.Errorf("json: invalid character at offset %d %s", i, what)
}

// pos is the output position of src[i] (i >= pend).
func (c *canonicalizer) pos(i int) int { return len(c.out) + i - c.pend }

// change replaces src[i:j] with repl in the output.
func (c *canonicalizer) change(i, j int, repl []byte) {
	if !c.dirty {
		c.dirty = true
		c.out = make([]byte, 0, len(c.src)+16)
	}
	c.out = append(c.out, c.src[c.pend:i]...)
	c.out = append(c.out, repl...)
	c.pend = j
}

// space skips white space at src[i:], which the output leaves out.
func (c *canonicalizer) space(i int) int {
	if i < len(c.src) && c.src[i] > ' ' { // no white space: the common case, inlined
		return i
	}
	return c.cutSpace(i)
}

func (c *canonicalizer) cutSpace(i int) int {
	j := skipSpace(c.src, i)
	if j != i {
		c.change(i, j, nil)
	}
	return j
}

// text is the output from position p to q, which lies wholly in out or
// wholly in src[pend:] (a key: see object).
func (c *canonicalizer) text(p, q int) []byte {
	if q <= len(c.out) {
		return c.out[p:q]
	}
	return c.src[c.pend+p-len(c.out) : c.pend+q-len(c.out)]
}

func (c *canonicalizer) value(i, depth int) (int, error) {
	src := c.src
	if i >= len(src) {
		return 0, syntaxError(i, "where a value should start")
	}
	switch ch := src[i]; {
	case ch == '"':
		return c.str(i)
	case ch == '{':
		return c.object(i, depth)
	case ch == '[':
		return c.array(i, depth)
	case ch == 't', ch == 'f', ch == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if end, ok := scanLiteral(src, i, lit); ok {
				return end, nil
			}
		}
	case ch == '-' || isDigit(ch):
		if end, ok := scanNumber(src, i); ok {
			return end, nil
		}
	}
	return 0, syntaxError(i, "in a value")
}

func (c *canonicalizer) object(i, depth int) (int, error) {
	if depth >= CanonicalMaxDepth {
		return 0, errCanonicalDepth
	}
	src := c.src
	obj := c.objects
	c.objects++
	i = c.space(i + 1)
	if i < len(src) && src[i] == '}' {
		return i + 1, nil
	}
	prev := -1
	// The object's members while it has few: a repeat is found by
	// comparing keys, with no hashing (most objects nested in properties).
	var small [smallObject]int
	few := small[:0]
	for {
		if i >= len(src) || src[i] != '"' {
			return 0, syntaxError(i, "where a key should start")
		}
		start := c.pos(i)
		end, err := c.str(i)
		if err != nil {
			return 0, err
		}
		// A key changed in part is flushed whole, so that its text is in
		// one place (text).
		if start < len(c.out) && c.pend < end {
			c.out = append(c.out, src[c.pend:end]...)
			c.pend = end
		}
		if prev >= 0 {
			c.members[prev].next = start
		}
		prev = len(c.members)
		c.members = append(c.members, member{obj: obj, start: start, next: -1, keyEnd: c.pos(end)})
		key := src[i:end] // the key as output: as written, or changed and flushed
		if start < len(c.out) {
			key = c.out[start:len(c.out)]
		}
		few = c.addMember(few, prev, key)
		if i = c.space(end); i >= len(src) || src[i] != ':' {
			return 0, syntaxError(i, "after a key")
		}
		if i, err = c.value(c.space(i+1), depth+1); err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = c.separator(i, '}'); err != nil || done {
			return i, err
		}
	}
}

func (c *canonicalizer) array(i, depth int) (int, error) {
	if depth >= CanonicalMaxDepth {
		return 0, errCanonicalDepth
	}
	src := c.src
	i = c.space(i + 1)
	if i < len(src) && src[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = c.value(i, depth+1); err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = c.separator(i, ']'); err != nil || done {
			return i, err
		}
	}
}

// separator reads what follows a member or an element at src[i:]: a comma
// (next is where the following one starts) or the closing byte (done,
// next is just past it).
func (c *canonicalizer) separator(i int, closing byte) (next int, done bool, err error) {
	src := c.src
	if i = c.space(i); i < len(src) && src[i] == ',' {
		return c.space(i + 1), false, nil
	}
	if i < len(src) && src[i] == closing {
		return i + 1, true, nil
	}
	return 0, false, syntaxError(i, "after a member or an element")
}

// replacement is U+FFFD in UTF-8.
var replacement = []byte("\uFFFD")

// str reads the string at src[i] == '"', writing its canonical form.
func (c *canonicalizer) str(i int) (int, error) {
	src := c.src
	for i++; ; {
		i = skipPlain(src, i)
		if i >= len(src) {
			return 0, syntaxError(i, "in a string (no end)")
		}
		switch ch := src[i]; {
		case ch == '"':
			return i + 1, nil
		case ch == '\\':
			var err error
			if i, err = c.escape(i); err != nil {
				return 0, err
			}
		case ch < 0x20:
			return 0, syntaxError(i, "in a string (a control character)")
		default:
			r, n := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && n == 1 {
				c.change(i, i+1, replacement)
			}
			i += n
		}
	}
}

// skipPlain returns the index of the first byte at src[i:] that is not
// plainByte (or len(src)), eight bytes at a time: the strings are most of
// the properties.
func skipPlain(src []byte, i int) int {
	const lsb, msb = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		quote, backslash := w^(lsb*'"'), w^(lsb*'\\')
		// Per byte: zero (the quote or the backslash), below 0x20, or
		// 0x80 and above. A borrow can mark bytes above the first marked
		// one only, so the lowest mark is exact.
		marks := ((quote-lsb)&^quote | (backslash-lsb)&^backslash | (w-lsb*0x20)&^w | w) & msb
		if marks != 0 {
			return i + bits.TrailingZeros64(marks)/8
		}
	}
	for i < len(src) && plainByte[src[i]] {
		i++
	}
	return i
}

// escape reads the escape at src[i] == '\\' and returns its end.
func (c *canonicalizer) escape(i int) (int, error) {
	src := c.src
	if i+1 >= len(src) {
		return 0, syntaxError(i, "in an escape")
	}
	switch src[i+1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case '/':
		c.change(i, i+2, []byte{'/'})
		return i + 2, nil
	case 'u':
	default:
		return 0, syntaxError(i, "in an escape")
	}
	r := hex4(src, i)
	if r < 0 {
		return 0, syntaxError(i, "in a \\u escape")
	}
	end := i + 6
	if utf16.IsSurrogate(r) {
		// As encoding/json decodes: a surrogate followed by the escape of
		// its pair is one character, any other surrogate is U+FFFD.
		if r2 := hex4(src, end); r2 >= 0 {
			if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
				r, end = pair, end+6
			} else {
				r = utf8.RuneError
			}
		} else {
			r = utf8.RuneError
		}
	}
	var buf [8]byte
	repl := appendCanonicalRune(buf[:0], r)
	if string(repl) != string(src[i:end]) {
		c.change(i, end, repl)
	}
	return end, nil
}

// hex4 is the value of the escape \uXXXX at src[i:], or -1.
func hex4(src []byte, i int) rune {
	if i+6 > len(src) || src[i] != '\\' || src[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, h := range src[i+2 : i+6] {
		switch {
		case '0' <= h && h <= '9':
			h -= '0'
		case 'a' <= h && h <= 'f':
			h -= 'a' - 10
		case 'A' <= h && h <= 'F':
			h -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(h)
	}
	return r
}

// appendCanonicalRune appends r as canonical strings hold it.
func appendCanonicalRune(dst []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(dst, '\\', byte(r))
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

const hexDigits = "0123456789abcdef"
