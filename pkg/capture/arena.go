package capture

import "sync"

// A request's envelopes are built into one buffer, its arena, taken from
// the publisher's pool and given back once JetStream acknowledged them
// all: a buffer per envelope was two fifths of the bytes a /batch/
// request allocated, and the garbage collector's work follows the bytes
// (docs/performance.md, "h/cap").

// envelopeExtra is the room an envelope needs beyond the event's own
// text: the uuid, timestamp and keys capture writes.
const envelopeExtra = 128

// maxPooledBuffer: a larger buffer (a rare, very large request) is left
// to the garbage collector rather than kept alive by a pool.
const maxPooledBuffer = 1 << 20

// bufferPool recycles byte buffers; the zero value is ready.
type bufferPool struct{ pool sync.Pool }

// get returns a buffer, empty, with room for at least n bytes. Give it
// back with put, holding no slice of it, or drop it.
func (p *bufferPool) get(n int) *[]byte {
	b, _ := p.pool.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	*b = (*b)[:0]
	return b
}

// put gives a buffer back, unless it is too large to keep.
func (p *bufferPool) put(b *[]byte) {
	if b == nil || cap(*b) > maxPooledBuffer {
		return
	}
	p.pool.Put(b)
}
