package dbsp

// KeyFunc extracts a key from a document: a JSON value compared with Equal.
// Returning ErrSkip drops the document without an error.
type KeyFunc func(Document) (any, error)

// JoinFunc combines a candidate pair of a join. It returns the output
// document and whether the pair matches; a pair that does not match, or that
// fails, contributes nothing.
type JoinFunc func(left, right Document) (out Document, ok bool, err error)

// Join is the incremental form of the DBSP (equi-)join, a bilinear operator:
//
//	Δ(A ⋈ B) = ΔA ⋈ B + A ⋈ ΔB + ΔA ⋈ ΔB
//
// computed as A ⋈ ΔB + ΔA ⋈ (B + ΔB) against the integrated inputs A and B,
// which the operator keeps. A pair (a, b) joins when the key functions give
// Equal keys and the JoinFunc accepts it; its output has weight
// weight(a)·weight(b). Each side's integral is hash-indexed by its key, so a
// delta document is matched only against the other side's documents with an
// equal key: the cost of a step is proportional to the delta and its matching
// partners. Without key functions every pair is a candidate (a nested loop).
// Join implements Limited: a step that would emit more than the bound fails
// and leaves the integrals as they were.
type Join struct {
	leftKey, rightKey KeyFunc
	f                 JoinFunc
	left, right       joinIndex
	max               int // bound of a step's output; 0: none
}

// NewJoin returns an incremental join at time zero. leftKey and rightKey
// index the two sides; if either is nil the join has no index and tests every
// pair with f. f must not be nil.
func NewJoin(leftKey, rightKey KeyFunc, f JoinFunc) *Join {
	if leftKey == nil || rightKey == nil {
		leftKey, rightKey = nil, nil
	}
	return &Join{leftKey: leftKey, rightKey: rightKey, f: f}
}

// joinIndex is one side's integral, partitioned by join key.
type joinIndex struct{ buckets valueMap[*ZSet] }

func (ix *joinIndex) bucket(kh uint64, key any) *ZSet {
	z, _ := ix.buckets.get(kh, key)
	return z
}

func (ix *joinIndex) insert(k keyed) {
	z, ok := ix.buckets.get(k.kh, k.key)
	if !ok {
		z = &ZSet{}
		ix.buckets.put(k.kh, k.key, z)
	}
	z.insertHashed(k.h, k.doc, k.w)
	if z.IsEmpty() {
		ix.buckets.del(k.kh, k.key)
	}
}

// keyed is a delta element with its join key.
type keyed struct {
	h, kh uint64
	doc   Document
	w     int
	key   any
}

var nilKeyHash = Hash(nil)

// keys computes the join key of every element of z; elements whose key
// fails are reported and left out.
func keys(z *ZSet, kf KeyFunc, errs *errorList) []keyed {
	out := make([]keyed, 0, z.Len())
	z.each(func(h uint64, doc Document, w int) bool {
		k := keyed{h: h, kh: nilKeyHash, doc: doc, w: w}
		if kf != nil {
			key, err := kf(doc)
			if err != nil {
				errs.add(err)
				return true
			}
			k.key, k.kh = key, Hash(key)
		}
		out = append(out, k)
		return true
	})
	return out
}

// emit adds f(l, r) with weight w to out. lh and rh are the hashes of l and
// r, so hashing a result that embeds them (a compound document) does not
// walk them again.
func (j *Join) emit(out *ZSet, l, r Document, lh, rh uint64, w int, errs *errorList) {
	res, ok, err := j.f(l, r)
	if err != nil {
		errs.add(err)
		return
	}
	if ok {
		hints := [2]hint{{p: mapPointer(l), h: lh}, {p: mapPointer(r), h: rh}}
		out.insertHashed(hashWith(res, hints[:]), res, w)
	}
}

// Step consumes the deltas of both inputs for one time step and returns the
// output delta. The integrals change only when the step succeeds: a step
// that exceeds the bound of SetMaxOutput returns a *LimitError and leaves
// them as they were.
func (j *Join) Step(dl, dr *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	lk := keys(dl, j.leftKey, &errs)
	rk := keys(dr, j.rightKey, &errs)
	exceeded := false
	match := func(ix *joinIndex, l keyed) bool {
		ix.bucket(l.kh, l.key).each(func(rh uint64, r Document, wr int) bool {
			j.emit(out, l.doc, r, l.h, rh, l.w*wr, &errs)
			exceeded = over(out, j.max)
			return !exceeded
		})
		return !exceeded
	}
	// A ⋈ ΔB, against the left integral.
	for _, r := range rk {
		j.left.bucket(r.kh, r.key).each(func(lh uint64, l Document, wl int) bool {
			j.emit(out, l, r.doc, lh, r.h, wl*r.w, &errs)
			exceeded = over(out, j.max)
			return !exceeded
		})
		if exceeded {
			return nil, &LimitError{Limit: j.max}
		}
	}
	// ΔA ⋈ B against the right integral, and ΔA ⋈ ΔB against an index of
	// ΔB alone, so that the integrals stay untouched until the step is done.
	var dix joinIndex
	if len(lk) > 0 {
		for _, r := range rk {
			dix.insert(r)
		}
	}
	for _, l := range lk {
		if !match(&j.right, l) || !match(&dix, l) {
			return nil, &LimitError{Limit: j.max}
		}
	}
	for _, r := range rk {
		j.right.insert(r)
	}
	for _, l := range lk {
		j.left.insert(l)
	}
	return out, errs.err()
}

// SetMaxOutput implements Limited.
func (j *Join) SetMaxOutput(n int) { j.max = n }

// Snapshot returns left ⋈ right computed from whole inputs (a hash join on
// the keys, or a nested loop without them), without touching the operator's
// state.
func (j *Join) Snapshot(left, right *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	var ix joinIndex
	for _, r := range keys(right, j.rightKey, &errs) {
		ix.insert(r)
	}
	for _, l := range keys(left, j.leftKey, &errs) {
		ix.bucket(l.kh, l.key).each(func(rh uint64, r Document, wr int) bool {
			j.emit(out, l.doc, r, l.h, rh, l.w*wr, &errs)
			return true
		})
	}
	return out, errs.err()
}

// Reset drops the integrated inputs.
func (j *Join) Reset() { j.left, j.right = joinIndex{}, joinIndex{} }
