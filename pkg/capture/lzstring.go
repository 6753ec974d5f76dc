package capture

import (
	"errors"
	"unicode/utf16"
)

// lz-string's "base64" form, which older browser libraries sent as
// compression=lz64: an LZW variant over UTF-16 code units whose codes are
// written least significant bit first, six bits to a character of this
// alphabet ("=" pads and reads as zero bits).
const lzAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

// lzValue maps an input byte to its six-bit value, or -1.
var lzValue = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(lzAlphabet); i++ {
		t[lzAlphabet[i]] = int8(i)
	}
	return t
}()

var (
	errLZInvalid   = errors.New("lz64 data is not valid lz-string base64")
	errLZTruncated = errors.New("lz64 data ends before its end marker")
	errLZTooLarge  = errors.New("lz64 data decompresses past the size limit")
)

// lzBits reads codes from the input, 6 bits per character, least
// significant bit of each code first.
type lzBits struct {
	in    string
	next  int // index of the next character to load
	value int // bits of the character being read
	mask  int // next bit of value to read; 0 means load the next character
}

func (r *lzBits) read(n int) (int, error) {
	out := 0
	for i := 0; i < n; i++ {
		if r.mask == 0 {
			v := 0 // past the end reads zeros; the caller checks the position
			if r.next < len(r.in) {
				if v = int(lzValue[r.in[r.next]]); v < 0 {
					return 0, errLZInvalid
				}
			}
			r.value, r.mask = v, 32
			r.next++
		}
		if r.value&r.mask != 0 {
			out |= 1 << i
		}
		r.mask >>= 1
	}
	return out, nil
}

// position is the reference implementation's input index: one past the
// last character loaded, counting a character as loaded as soon as the
// previous one is used up.
func (r *lzBits) position() int {
	if r.mask == 0 {
		return r.next + 1
	}
	return r.next
}

// decompressLZ64 decodes lz-string's compressToBase64 output and returns
// the text as UTF-8. It stops with errLZTooLarge once the output passes
// limit bytes of UTF-16 (a small input can describe a huge output).
func decompressLZ64(in string, limit int) ([]byte, error) {
	if in == "" {
		return nil, errLZInvalid
	}
	r := &lzBits{in: in}
	// Codes 0, 1 and 2 are commands: a literal of 8 bits, a literal of 16
	// bits, the end. Entries start at 3.
	dict := make([][]uint16, 3, 256)
	literal := func(code int) ([]uint16, error) {
		width := 8
		if code == 1 {
			width = 16
		}
		c, err := r.read(width)
		return []uint16{uint16(c)}, err
	}
	first, err := r.read(2)
	if err != nil {
		return nil, err
	}
	switch first {
	case 2:
		return []byte{}, nil
	case 3:
		return nil, errLZInvalid
	}
	w, err := literal(first)
	if err != nil {
		return nil, err
	}
	dict = append(dict, w)
	out := append(make([]uint16, 0, 2*len(in)), w...)
	numBits, enlargeIn := 3, 4
	grow := func() {
		if enlargeIn == 0 {
			enlargeIn = 1 << numBits
			numBits++
		}
	}
	for {
		if r.position() > len(in) {
			return nil, errLZTruncated
		}
		code, err := r.read(numBits)
		if err != nil {
			return nil, err
		}
		switch code {
		case 0, 1:
			c, err := literal(code)
			if err != nil {
				return nil, err
			}
			dict = append(dict, c)
			code = len(dict) - 1
			enlargeIn--
		case 2:
			return []byte(string(utf16.Decode(out))), nil
		}
		grow()
		var entry []uint16
		switch {
		case code < len(dict):
			entry = dict[code]
		case code == len(dict):
			entry = append(w[:len(w):len(w)], w[0])
		default:
			return nil, errLZInvalid
		}
		out = append(out, entry...)
		if 2*len(out) > limit {
			return nil, errLZTooLarge
		}
		dict = append(dict, append(w[:len(w):len(w)], entry[0]))
		enlargeIn--
		w = entry
		grow()
	}
}
