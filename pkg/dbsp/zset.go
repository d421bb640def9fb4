package dbsp

import (
	"fmt"
	"slices"
	"strings"
)

// Entry is one element of a Z-set: a document and its non-zero weight.
type Entry struct {
	Doc    Document
	Weight int
}

// ZSet is a Z-set of documents: a finite map from documents to non-zero
// integer weights, where documents are identified by deep value equality
// (Equal). Elements are found by Hash, with collision buckets resolved by
// Equal. Inserting a weight that brings a document's weight to zero removes
// it.
//
// The zero value is an empty Z-set ready to use. A ZSet is not safe for
// concurrent modification. Documents are stored by reference and must not be
// modified after insertion.
//
// A small Z-set (a delta of a few changes, the common case) keeps its
// elements in an inline array and allocates no map; it moves to the maps
// when it outgrows the array.
type ZSet struct {
	small  [smallZSet]hashedEntry // the elements while m is nil
	nsmall int
	m      map[uint64]Entry   // one entry per hash
	over   map[uint64][]Entry // further entries whose hash collides with m's
	n      int
}

// smallZSet is how many elements a Z-set holds inline before it uses maps.
const smallZSet = 4

type hashedEntry struct {
	h uint64
	Entry
}

// NewZSet returns an empty Z-set.
func NewZSet() *ZSet { return &ZSet{} }

// FromDocuments returns the Z-set holding each document with weight +1
// (repeated documents add up).
func FromDocuments(docs ...Document) *ZSet {
	z := &ZSet{}
	for _, d := range docs {
		z.Insert(d, 1)
	}
	return z
}

// Len returns the number of distinct documents with non-zero weight.
func (z *ZSet) Len() int {
	if z == nil {
		return 0
	}
	return z.n
}

// IsEmpty reports whether the Z-set has no elements (the zero of the group).
func (z *ZSet) IsEmpty() bool { return z.Len() == 0 }

// Insert adds weight to the weight of doc; the document vanishes when its
// weight becomes zero. Insert(doc, 0) is a no-op.
func (z *ZSet) Insert(doc Document, weight int) {
	if weight == 0 {
		return
	}
	z.insertHashed(Hash(doc), doc, weight)
}

// InsertHashed is Insert with h = Hash(doc) computed by the caller, e.g.
// kept from an earlier insertion of the same document so that removing it
// does not walk it again. A wrong h breaks the Z-set.
func (z *ZSet) InsertHashed(h uint64, doc Document, weight int) { z.insertHashed(h, doc, weight) }

// insertHashed is Insert with a precomputed Hash(doc).
func (z *ZSet) insertHashed(h uint64, doc Document, weight int) {
	if weight == 0 {
		return
	}
	if z.m == nil {
		for i := 0; i < z.nsmall; i++ {
			e := &z.small[i]
			if e.h != h || !Equal(e.Doc, doc) {
				continue
			}
			e.Weight += weight
			if e.Weight == 0 {
				z.nsmall--
				*e = z.small[z.nsmall]
				z.small[z.nsmall] = hashedEntry{}
				z.n--
			}
			return
		}
		if z.nsmall < smallZSet {
			z.small[z.nsmall] = hashedEntry{h, Entry{Doc: doc, Weight: weight}}
			z.nsmall++
			z.n++
			return
		}
		z.spill()
	}
	e, ok := z.m[h]
	if !ok {
		z.m[h] = Entry{Doc: doc, Weight: weight}
		z.n++
		return
	}
	if Equal(e.Doc, doc) {
		e.Weight += weight
		if e.Weight != 0 {
			z.m[h] = e
			return
		}
		z.n--
		// Promote a colliding entry, if any, to the primary slot.
		if lst := z.over[h]; len(lst) > 0 {
			z.m[h] = lst[len(lst)-1]
			z.setOverflow(h, lst[:len(lst)-1])
		} else {
			delete(z.m, h)
		}
		return
	}
	lst := z.over[h]
	for i := range lst {
		if Equal(lst[i].Doc, doc) {
			lst[i].Weight += weight
			if lst[i].Weight == 0 {
				z.n--
				lst[i] = lst[len(lst)-1]
				z.setOverflow(h, lst[:len(lst)-1])
			}
			return
		}
	}
	if z.over == nil {
		z.over = make(map[uint64][]Entry)
	}
	z.over[h] = append(lst, Entry{Doc: doc, Weight: weight})
	z.n++
}

// spill moves the inline elements into the maps.
func (z *ZSet) spill() {
	z.m = make(map[uint64]Entry, 2*smallZSet)
	small, n := z.small, z.nsmall
	z.small, z.nsmall, z.n = [smallZSet]hashedEntry{}, 0, 0
	for _, e := range small[:n] {
		z.insertHashed(e.h, e.Doc, e.Weight)
	}
}

func (z *ZSet) setOverflow(h uint64, lst []Entry) {
	if len(lst) == 0 {
		delete(z.over, h)
		return
	}
	z.over[h] = lst
}

// Weight returns the weight of doc, 0 if it is not an element.
func (z *ZSet) Weight(doc Document) int {
	if z == nil || z.n == 0 {
		return 0
	}
	return z.weightHashed(Hash(doc), doc)
}

func (z *ZSet) weightHashed(h uint64, doc Document) int {
	if z.m == nil {
		for i := 0; i < z.nsmall; i++ {
			if e := &z.small[i]; e.h == h && Equal(e.Doc, doc) {
				return e.Weight
			}
		}
		return 0
	}
	e, ok := z.m[h]
	if !ok {
		return 0
	}
	if Equal(e.Doc, doc) {
		return e.Weight
	}
	for _, o := range z.over[h] {
		if Equal(o.Doc, doc) {
			return o.Weight
		}
	}
	return 0
}

// each calls f for every element with its hash, in unspecified order, until
// f returns false. The Z-set must not be modified during the walk.
func (z *ZSet) each(f func(h uint64, doc Document, weight int) bool) {
	if z == nil {
		return
	}
	for i := 0; i < z.nsmall; i++ {
		if e := &z.small[i]; !f(e.h, e.Doc, e.Weight) {
			return
		}
	}
	for h, e := range z.m {
		if !f(h, e.Doc, e.Weight) {
			return
		}
	}
	for h, lst := range z.over {
		for _, e := range lst {
			if !f(h, e.Doc, e.Weight) {
				return
			}
		}
	}
}

// Range calls f for every element in unspecified order until f returns
// false. It is the cheap iteration for order-insensitive work; use Entries
// for a deterministic order. The Z-set must not be modified during the walk.
func (z *ZSet) Range(f func(doc Document, weight int) bool) {
	z.each(func(_ uint64, doc Document, weight int) bool { return f(doc, weight) })
}

// Entries returns the elements sorted by the canonical order of documents
// (Compare), so the result is deterministic.
func (z *ZSet) Entries() []Entry {
	out := make([]Entry, 0, z.Len())
	z.each(func(_ uint64, doc Document, weight int) bool {
		out = append(out, Entry{Doc: doc, Weight: weight})
		return true
	})
	slices.SortFunc(out, func(a, b Entry) int { return Compare(a.Doc, b.Doc) })
	return out
}

// Documents returns the documents of the Z-set in canonical order, each
// repeated weight times; elements with negative weight are left out. It is
// the multiset view of a Z-set that represents a collection.
func (z *ZSet) Documents() []Document {
	var out []Document
	for _, e := range z.Entries() {
		for i := 0; i < e.Weight; i++ {
			out = append(out, e.Doc)
		}
	}
	return out
}

// Clone returns a copy of the Z-set that shares the (immutable) documents.
func (z *ZSet) Clone() *ZSet {
	c := &ZSet{}
	if z == nil || z.n == 0 {
		return c
	}
	c.n = z.n
	if z.m == nil {
		c.small, c.nsmall = z.small, z.nsmall
		return c
	}
	c.m = make(map[uint64]Entry, len(z.m))
	for h, e := range z.m {
		c.m[h] = e
	}
	if len(z.over) > 0 {
		c.over = make(map[uint64][]Entry, len(z.over))
		for h, lst := range z.over {
			c.over[h] = slices.Clone(lst)
		}
	}
	return c
}

// Add adds other into z in place (z += other) and returns z. Cost is
// proportional to other's size.
func (z *ZSet) Add(other *ZSet) *ZSet {
	if z == other {
		z.scale(2)
		return z
	}
	other.each(func(h uint64, doc Document, weight int) bool {
		z.insertHashed(h, doc, weight)
		return true
	})
	return z
}

// AddScaled adds k·other into z in place and returns z.
func (z *ZSet) AddScaled(other *ZSet, k int) *ZSet {
	if k == 0 {
		return z
	}
	if z == other {
		z.scale(1 + k)
		return z
	}
	other.each(func(h uint64, doc Document, weight int) bool {
		z.insertHashed(h, doc, weight*k)
		return true
	})
	return z
}

// scale multiplies every weight by k in place.
func (z *ZSet) scale(k int) {
	if k == 0 {
		*z = ZSet{}
		return
	}
	for i := 0; i < z.nsmall; i++ {
		z.small[i].Weight *= k
	}
	for h, e := range z.m {
		e.Weight *= k
		z.m[h] = e
	}
	for _, lst := range z.over {
		for i := range lst {
			lst[i].Weight *= k
		}
	}
}

// Plus returns the sum z + other as a new Z-set (the group operation of
// Z-sets).
func (z *ZSet) Plus(other *ZSet) *ZSet {
	if z.Len() < other.Len() {
		return other.Clone().Add(z)
	}
	return z.Clone().Add(other)
}

// Minus returns z - other as a new Z-set.
func (z *ZSet) Minus(other *ZSet) *ZSet { return z.Clone().AddScaled(other, -1) }

// Negate returns -z as a new Z-set (the group inverse).
func (z *ZSet) Negate() *ZSet { return (&ZSet{}).AddScaled(z, -1) }

// Equal reports whether two Z-sets have the same elements with the same
// weights.
func (z *ZSet) Equal(other *ZSet) bool {
	if z.Len() != other.Len() {
		return false
	}
	eq := true
	z.each(func(h uint64, doc Document, weight int) bool {
		eq = other.weightHashed(h, doc) == weight
		return eq
	})
	return eq
}

// Positive returns the elements of z with positive weight, with their
// weights, as a new Z-set.
func (z *ZSet) Positive() *ZSet {
	out := &ZSet{}
	z.each(func(h uint64, doc Document, weight int) bool {
		if weight > 0 {
			out.insertHashed(h, doc, weight)
		}
		return true
	})
	return out
}

// String renders the Z-set in canonical order as {doc: weight, ...} for
// debugging and test failures.
func (z *ZSet) String() string {
	var b strings.Builder
	b.WriteString("{")
	for i, e := range z.Entries() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v: %+d", e.Doc, e.Weight)
	}
	b.WriteString("}")
	return b.String()
}
