package capture

import (
	"compress/gzip"
	"io"
	"sync"
)

// A request's envelopes are built into one buffer, its arena, taken from
// the publisher's pool and given back once JetStream acknowledged them
// all: a buffer per envelope was two fifths of the bytes a /batch/
// request allocated, and the garbage collector's work follows the bytes
// (docs/performance-history.md, "a request's buffers recycled").

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

// decodeBuffers are what decoding borrows for a request (Publisher.Decode):
// the body, its decompressed form, and gzip readers.
type decodeBuffers struct {
	bodies bufferPool
	gzips  sync.Pool // *gzip.Reader
	raws   sync.Pool // *[]Raw, the events of a request
}

// maxPooledRaws: a larger slice of events is left to the collector.
const maxPooledRaws = 4096

// borrowRaws returns room for a request's events (nil: none pooled).
func (b *Batch) borrowRaws() []Raw {
	if b.bufs == nil {
		return nil
	}
	if p, ok := b.bufs.raws.Get().(*[]Raw); ok {
		return *p
	}
	return nil
}

// borrow returns an empty buffer with room for n bytes, from the batch's
// pool when it has one. keep records the buffer finally used.
func (b *Batch) borrow(n int) *[]byte {
	if b.bufs == nil {
		buf := make([]byte, 0, n)
		return &buf
	}
	return b.bufs.bodies.get(n)
}

// keep records a buffer (as grown) to give back on release.
func (b *Batch) keep(buf []byte) {
	if b.bufs != nil && cap(buf) > 0 {
		b.borrowed = append(b.borrowed, &buf)
	}
}

// release gives back the buffers the batch's events point into; the batch
// has no events after it. Publisher.Capture calls it once the envelopes,
// which copy what they need, are built.
func (b *Batch) release() {
	if b.bufs != nil {
		for _, buf := range b.borrowed {
			b.bufs.bodies.put(buf)
		}
		if r := b.raws; cap(r) > 0 && cap(r) <= maxPooledRaws {
			// Cleared: a pooled slice must not keep a body alive.
			clear(r[:cap(r)])
			r = r[:0]
			b.bufs.raws.Put(&r)
		}
	}
	b.borrowed, b.Events, b.raws = nil, nil, nil
}

func (b *Batch) gzipReader(r io.Reader) (*gzip.Reader, error) {
	if b.bufs != nil {
		if zr, ok := b.bufs.gzips.Get().(*gzip.Reader); ok {
			if err := zr.Reset(r); err != nil {
				return nil, err
			}
			return zr, nil
		}
	}
	return gzip.NewReader(r)
}

func (b *Batch) putGzipReader(zr *gzip.Reader) {
	if b.bufs != nil {
		b.bufs.gzips.Put(zr)
	}
}
