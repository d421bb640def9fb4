package dbsp

// PadFunc builds the output of a left document that has no partner in a left
// join (in SQL terms, the row padded with nulls).
type PadFunc func(left Document) (Document, error)

// LeftJoin is the incremental left outer join of the DBSP literature, a join
// plus the anti-join padded:
//
//	A ⟕ B = A ⋈ B + (A ▷ B) × pad
//
// A ⋈ B is a Join with the same key and join functions. The anti-join part
// holds each left document a with weight weight(a) when its match count, the
// sum of the weights of the right documents b with an Equal key for which
// the JoinFunc accepts (a, b), is zero; its output is pad(a). A pair whose
// JoinFunc fails counts as no match (the Join part reports the error).
//
// A step costs what the Join's step costs, plus, for every join key in the
// step's deltas, a test of each left document with that key against the
// right documents with that key (before and after the step): a left
// document's status changes only when it or a right document of its key
// changes. LeftJoin implements Limited: the step fails when either part
// exceeds the bound, and then leaves the integrals as they were.
type LeftJoin struct {
	join *Join
	pad  PadFunc
}

// NewLeftJoin returns an incremental left join at time zero. leftKey,
// rightKey and f are as for NewJoin; pad must not be nil.
func NewLeftJoin(leftKey, rightKey KeyFunc, f JoinFunc, pad PadFunc) *LeftJoin {
	return &LeftJoin{join: NewJoin(leftKey, rightKey, f), pad: pad}
}

// matches returns the match count of l against the documents of z.
func (lj *LeftJoin) matches(l Document, z *ZSet) int {
	m := 0
	z.each(func(_ uint64, r Document, w int) bool {
		if _, ok, err := lj.join.f(l, r); err == nil && ok {
			m += w
		}
		return true
	})
	return m
}

// padded is the weight of l's padded output for left weight w and match
// count m.
func padded(w, m int) int {
	if m != 0 {
		return 0
	}
	return w
}

// emitPad adds pad(l) with weight w to out.
func (lj *LeftJoin) emitPad(out *ZSet, l Document, lh uint64, w int, errs *errorList) {
	res, err := lj.pad(l)
	if err != nil {
		errs.add(err)
		return
	}
	hints := [1]hint{{p: mapPointer(l), h: lh}}
	out.insertHashed(hashWith(res, hints[:]), res, w)
}

// keyGroup is the part of a step's deltas with one join key.
type keyGroup struct {
	kh     uint64
	key    any
	dl, dr ZSet
}

// Step consumes the deltas of both inputs for one time step and returns the
// output delta. A step that exceeds the bound of SetMaxOutput returns a
// *LimitError and leaves the integrals as they were.
func (lj *LeftJoin) Step(dl, dr *ZSet) (*ZSet, error) {
	j := lj.join
	var errs, ignored errorList
	var groups valueMap[*keyGroup]
	var order []*keyGroup
	group := func(k keyed) *keyGroup {
		g, ok := groups.get(k.kh, k.key)
		if !ok {
			g = &keyGroup{kh: k.kh, key: k.key}
			groups.put(k.kh, k.key, g)
			order = append(order, g)
		}
		return g
	}
	for _, k := range keys(dl, j.leftKey, &ignored) { // the Join part reports key errors
		group(k).dl.insertHashed(k.h, k.doc, k.w)
	}
	for _, k := range keys(dr, j.rightKey, &ignored) {
		group(k).dr.insertHashed(k.h, k.doc, k.w)
	}
	anti := &ZSet{}
	for _, g := range order {
		oldL, oldR := j.left.bucket(g.kh, g.key), j.right.bucket(g.kh, g.key)
		visit := func(h uint64, l Document) bool {
			wOld := 0
			if oldL != nil {
				wOld = oldL.weightHashed(h, l)
			}
			wNew := wOld + g.dl.weightHashed(h, l)
			mOld := lj.matches(l, oldR)
			mNew := mOld + lj.matches(l, &g.dr)
			if d := padded(wNew, mNew) - padded(wOld, mOld); d != 0 {
				lj.emitPad(anti, l, h, d, &errs)
			}
			return !over(anti, j.max)
		}
		ok := true
		g.dl.each(func(h uint64, l Document, _ int) bool {
			ok = visit(h, l)
			return ok
		})
		if ok && !g.dr.IsEmpty() {
			oldL.each(func(h uint64, l Document, _ int) bool {
				if g.dl.weightHashed(h, l) != 0 {
					return true // visited above
				}
				ok = visit(h, l)
				return ok
			})
		}
		if !ok {
			return nil, &LimitError{Limit: j.max}
		}
	}
	out, err := j.Step(dl, dr)
	if _, isLimit := err.(*LimitError); isLimit {
		return nil, err
	}
	errs.add(err)
	return out.Add(anti), errs.err()
}

// SetMaxOutput implements Limited: it bounds each part of a step's output.
func (lj *LeftJoin) SetMaxOutput(n int) { lj.join.SetMaxOutput(n) }

// Snapshot returns left ⟕ right computed from whole inputs, without touching
// the operator's state.
func (lj *LeftJoin) Snapshot(left, right *ZSet) (*ZSet, error) {
	j := lj.join
	out, err := j.Snapshot(left, right)
	var errs, ignored errorList
	errs.add(err)
	var ix joinIndex
	for _, r := range keys(right, j.rightKey, &ignored) {
		ix.insert(r)
	}
	for _, l := range keys(left, j.leftKey, &ignored) {
		if w := padded(l.w, lj.matches(l.doc, ix.bucket(l.kh, l.key))); w != 0 {
			lj.emitPad(out, l.doc, l.h, w, &errs)
		}
	}
	return out, errs.err()
}

// Reset drops the integrated inputs.
func (lj *LeftJoin) Reset() { lj.join.Reset() }
