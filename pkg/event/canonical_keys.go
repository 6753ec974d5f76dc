package event

import (
	"hash/maphash"
	"math/bits"
	"slices"
)

// Repeated keys. A key repeated in one object keeps its last member: a
// repeat finds the earlier member and makes it a hole, cut from the
// output at the end. An object's first smallObject keys are compared with
// one another; from then on each key is entered in a table of the
// document's keys (with its object's number). Each member is entered
// once (again when the table grows), so this is linear in the input too,
// and the hash is seeded per process: input cannot be made to collide.

// smallObject is the most members an object has before its keys go to
// the table.
const smallObject = 8

// member is an object member, in output positions.
type member struct {
	obj         int
	start, next int // the key's start; the next member's key's start (-1 before it is read)
	keyEnd      int
	hash        uint64
	hashed      bool // entered in the table
}

// addMember handles member m (with its key as output) of an object whose
// members so far are few (nil once the object's keys are in the table)
// and returns the new few.
func (c *canonicalizer) addMember(few []int, m int, key []byte) []int {
	if few == nil {
		c.addKey(m, key)
		return nil
	}
	for i, j := range few {
		if o := &c.members[j]; o.keyEnd-o.start == len(key) && string(c.key(j)) == string(key) {
			c.holes = append(c.holes, span{c.members[j].start, c.members[j].next})
			few[i] = m
			return few
		}
	}
	if len(few) < cap(few) {
		return append(few, m)
	}
	for _, j := range few {
		c.addKey(j, c.key(j))
	}
	c.addKey(m, key)
	return nil
}

// key is member m's key, as output.
func (c *canonicalizer) key(m int) []byte {
	mb := &c.members[m]
	return c.text(mb.start, mb.keyEnd)
}

type span struct{ start, end int }

// newTable empties the key table at mask+1 slots.
func (c *canonicalizer) newTable(mask int) {
	if mask >= len(c.slots) {
		c.slots = make([]uint64, mask+1)
		c.gen = 0
	}
	if c.gen++; c.gen == 0 { // wrapped: old entries could look current
		clear(c.slots)
		c.gen = 1
	}
	c.mask, c.used = mask, 0
}

// pow2 is the least power of two >= n (n >= 1).
func pow2(n int) int { return 1 << bits.Len(uint(max(n, 1)-1)) }

// addKey enters member m's key (as output); when its object has the key
// already, the earlier member becomes a hole.
func (c *canonicalizer) addKey(m int, key []byte) {
	mb := &c.members[m]
	mb.hash = maphash.Bytes(c.seed, key) ^ uint64(mb.obj)*0x9e3779b97f4a7c15
	mb.hashed = true
	if j := c.insert(m, key); j >= 0 {
		c.holes = append(c.holes, span{c.members[j].start, c.members[j].next})
	}
	if c.used++; 2*c.used > c.mask {
		c.grow()
	}
}

// insert puts member m in the table and returns the member of the same
// object and key it replaced, or -1.
func (c *canonicalizer) insert(m int, key []byte) int {
	mb := &c.members[m]
	cur := uint64(c.gen) << 32
	for s := int(mb.hash) & c.mask; ; s = (s + 1) & c.mask {
		e := c.slots[s]
		if e&^0xffffffff != cur {
			c.slots[s] = cur | uint64(m+1)
			return -1
		}
		j := int(e&0xffffffff) - 1
		if o := &c.members[j]; o.hash == mb.hash && o.obj == mb.obj && string(c.key(j)) == string(key) {
			c.slots[s] = cur | uint64(m+1)
			c.used-- // replaced, not added
			return j
		}
	}
}

// grow doubles the table and enters every member again, in order, so
// each key's slot holds its last member.
func (c *canonicalizer) grow() {
	c.newTable(2*c.mask + 1)
	for m := range c.members {
		if c.members[m].hashed && c.insert(m, c.key(m)) < 0 {
			c.used++
		}
	}
}

// cutHoles removes the holes from out.
func (c *canonicalizer) cutHoles() {
	if len(c.holes) == 0 {
		return
	}
	slices.SortFunc(c.holes, func(a, b span) int { return a.start - b.start })
	w, r := 0, 0
	for _, h := range c.holes {
		if h.end <= r {
			continue // inside a hole already cut
		}
		h.start = max(h.start, r)
		w += copy(c.out[w:], c.out[r:h.start])
		r = h.end
	}
	w += copy(c.out[w:], c.out[r:])
	c.out = c.out[:w]
}
