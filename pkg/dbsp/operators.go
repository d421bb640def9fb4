package dbsp

import (
	"errors"
	"fmt"
)

// ErrSkip may be returned by any function passed to an operator (a map,
// predicate, key, join or aggregate function) to drop the document, pair or
// group it was called for without reporting an error.
var ErrSkip = errors.New("dbsp: skip")

// maxErrors bounds the per-document errors one step reports individually.
const maxErrors = 10

// MoreErrors stands for the errors of one step past the first ones an
// operator reports (10): how many there were, without their text.
type MoreErrors struct{ N int }

func (e *MoreErrors) Error() string { return fmt.Sprintf("and %d more errors", e.N) }

// errorList collects the per-document errors of one step. Operators keep
// going after an error: the failing document (or pair, or group) contributes
// nothing, consistently in Step and Snapshot as long as the functions are
// deterministic, so the operator state stays consistent.
type errorList struct {
	errs []error
	more int
}

func (l *errorList) add(err error) {
	if err == nil || errors.Is(err, ErrSkip) {
		return
	}
	if len(l.errs) < maxErrors {
		l.errs = append(l.errs, err)
		return
	}
	l.more++
}

func (l *errorList) err() error {
	if l.more > 0 {
		return errors.Join(append(l.errs, &MoreErrors{N: l.more})...)
	}
	return errors.Join(l.errs...)
}

// Operator is a unary stream operator in incremental form. Step consumes the
// delta of one time step and returns the output delta; Snapshot, the
// operator's snapshot twin, computes the output collection from a whole input
// collection without touching the incremental state. For every input stream,
// Integrate(Step(Δ)) equals Snapshot(Integrate(Δ)) at every step.
//
// Errors of the operator's functions do not stop a step: the document that
// caused one contributes nothing, and the step returns its output together
// with the joined errors (at most ten, then a count).
type Operator interface {
	Step(delta *ZSet) (*ZSet, error)
	Snapshot(input *ZSet) (*ZSet, error)
	// Reset drops the incremental state, returning to time zero.
	Reset()
}

// Integrate is the DBSP integration operator I: its output at time t is the
// sum of its inputs up to t.
type Integrate struct{ acc ZSet }

// NewIntegrate returns an integrator at time zero (integral empty).
func NewIntegrate() *Integrate { return &Integrate{} }

// Step adds delta to the integral and returns the integral. The result is
// the operator's state: read it, Clone it, but do not modify it.
func (i *Integrate) Step(delta *ZSet) *ZSet {
	i.acc.Add(delta)
	return &i.acc
}

// Value returns the current integral (read-only, as for Step).
func (i *Integrate) Value() *ZSet { return &i.acc }

// Reset empties the integral.
func (i *Integrate) Reset() { i.acc = ZSet{} }

// Differentiate is the DBSP differentiation operator D: its output at time t
// is x[t] - x[t-1], the inverse of Integrate.
type Differentiate struct{ prev *ZSet }

// NewDifferentiate returns a differentiator whose previous input is empty.
func NewDifferentiate() *Differentiate { return &Differentiate{} }

// Step returns x - previous x as a new Z-set and remembers a copy of x.
func (d *Differentiate) Step(x *ZSet) *ZSet {
	out := x.Minus(d.prev)
	d.prev = x.Clone()
	return out
}

// Reset forgets the previous input.
func (d *Differentiate) Reset() { d.prev = nil }

// Delay is the DBSP delay operator z^-1: its output at time t is its input at
// time t-1, and the empty Z-set at time 0.
type Delay struct{ prev *ZSet }

// NewDelay returns a delay whose initial output is the empty Z-set.
func NewDelay() *Delay { return &Delay{} }

// Step returns the previous input (a Z-set owned by the caller) and remembers
// a copy of x.
func (d *Delay) Step(x *ZSet) *ZSet {
	out := d.prev
	if out == nil {
		out = NewZSet()
	}
	d.prev = x.Clone()
	return out
}

// Reset restores the initial (empty) output.
func (d *Delay) Reset() { d.prev = nil }

// Distinct is the incremental form of the DBSP distinct operator, which maps
// a Z-set to the set of its positively weighted elements, each with weight 1.
// It keeps the integral of its input and, following the paper's H function,
// emits +1 for a document whose integrated weight becomes positive and -1 for
// one whose integrated weight stops being positive; no other change produces
// output.
type Distinct struct{ acc ZSet }

// NewDistinct returns an incremental distinct at time zero.
func NewDistinct() *Distinct { return &Distinct{} }

// Step implements Operator; it never fails.
func (d *Distinct) Step(delta *ZSet) (*ZSet, error) {
	out := &ZSet{}
	delta.each(func(h uint64, doc Document, w int) bool {
		old := d.acc.weightHashed(h, doc)
		d.acc.insertHashed(h, doc, w)
		switch now := old + w; {
		case old <= 0 && now > 0:
			out.insertHashed(h, doc, 1)
		case old > 0 && now <= 0:
			out.insertHashed(h, doc, -1)
		}
		return true
	})
	return out, nil
}

// Snapshot returns distinct(input): each positively weighted document with
// weight 1.
func (d *Distinct) Snapshot(input *ZSet) (*ZSet, error) {
	out := &ZSet{}
	input.each(func(h uint64, doc Document, w int) bool {
		if w > 0 {
			out.insertHashed(h, doc, 1)
		}
		return true
	})
	return out, nil
}

// Reset implements Operator.
func (d *Distinct) Reset() { d.acc = ZSet{} }

// MapFunc transforms one document.
type MapFunc func(Document) (Document, error)

// Map is the lifted map operator: each element d with weight w becomes f(d)
// with weight w (weights of equal results add up). It is linear, so Step and
// Snapshot both apply f to their argument and Map has no state, unless it
// memoizes (see Memoize).
type Map struct {
	f    MapFunc
	memo *valueMap[mapResult] // by input document, when memoizing
	log  []memoChange         // the memo entries the last Step changed, as they were
}

// memoChange is one memo entry as it was before a Step changed it.
type memoChange struct {
	h   uint64
	doc Document
	was mapResult
	ok  bool // the entry existed
}

// UndoStep restores the memo of a memoizing Map to what it was before the
// last Step, so that a refused step (see LimitError) leaves the results it
// remembered as they were rather than evaluating f again; a no-op for a
// Map that does not memoize.
func (m *Map) UndoStep() {
	for i := len(m.log) - 1; i >= 0; i-- {
		c := m.log[i]
		if c.ok {
			m.memo.put(c.h, c.doc, c.was)
		} else {
			m.memo.del(c.h, c.doc)
		}
	}
	m.ForgetStep()
}

// ForgetStep empties the undo log of the last Step, releasing the
// documents it references (and a large log's array): call it once the step
// stands.
func (m *Map) ForgetStep() {
	if cap(m.log) > 4096 {
		m.log = nil
		return
	}
	clear(m.log)
	m.log = m.log[:0]
}

// mapResult is what a memoizing Map remembers of one input document: the
// result f gave it, the result's hash, and the document's integrated
// weight.
type mapResult struct {
	out    Document
	h      uint64
	weight int
}

// NewMap returns the lifted map of f.
func NewMap(f MapFunc) *Map { return &Map{f: f} }

// Memoize makes Step remember, for each document of the integrated input
// (the sum of the deltas stepped so far), the result f gave it: a later
// delta that removes the document emits that result again without calling
// f or hashing the result, so an update (the old version out, the new one
// in) evaluates f once, and an f that reads the clock retracts exactly
// what it emitted. The cost is one entry per distinct live input document,
// which references the document: memoize only where the input documents
// are kept alive anyway (source objects), not where they are built per
// step. Step then changes the operator's state (UndoStep undoes the last one);
// Snapshot does not use it; Reset clears it.
func (m *Map) Memoize() { m.memo = &valueMap[mapResult]{} }

// Step implements Operator.
func (m *Map) Step(delta *ZSet) (*ZSet, error) {
	if m.memo == nil {
		return m.Snapshot(delta)
	}
	out := &ZSet{}
	var errs errorList
	m.ForgetStep()
	delta.each(func(h uint64, doc Document, w int) bool {
		r, ok := m.memo.get(h, doc)
		was := r
		if !ok {
			res, err := m.f(doc)
			if err != nil {
				errs.add(err)
				return true
			}
			r = mapResult{out: res, h: Hash(res)}
		}
		m.log = append(m.log, memoChange{h, doc, was, ok})
		r.weight += w
		if r.weight == 0 {
			m.memo.del(h, doc)
		} else {
			m.memo.put(h, doc, r)
		}
		out.insertHashed(r.h, r.out, w)
		return true
	})
	return out, errs.err()
}

// Snapshot implements Operator: f applied to every element of input.
func (m *Map) Snapshot(input *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	input.each(func(_ uint64, doc Document, w int) bool {
		res, err := m.f(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		out.Insert(res, w)
		return true
	})
	return out, errs.err()
}

// Reset implements Operator; it clears the memo of a memoizing Map.
func (m *Map) Reset() {
	if m.memo != nil {
		m.memo = &valueMap[mapResult]{}
	}
	m.log = nil
}

// Predicate decides whether a document passes a Filter.
type Predicate func(Document) (bool, error)

// Filter is the lifted selection operator: it keeps the elements for which
// the predicate holds, with their weights. It is linear and has no state.
type Filter struct{ p Predicate }

// NewFilter returns the lifted filter of p.
func NewFilter(p Predicate) *Filter { return &Filter{p: p} }

// Step implements Operator.
func (f *Filter) Step(delta *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	delta.each(func(h uint64, doc Document, w int) bool {
		ok, err := f.p(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		if ok {
			out.insertHashed(h, doc, w)
		}
		return true
	})
	return out, errs.err()
}

// Snapshot implements Operator; for a linear operator it is Step.
func (f *Filter) Snapshot(input *ZSet) (*ZSet, error) { return f.Step(input) }

// Reset implements Operator; Filter has no state.
func (f *Filter) Reset() {}

// FlatMapFunc expands one document into zero or more documents.
type FlatMapFunc func(Document) ([]Document, error)

// SizeFunc tells, without building them, how many documents a FlatMapFunc
// returns for a document. FlatMap uses it only to report the would-be size
// of a step that exceeds its limit.
type SizeFunc func(Document) int

// FlatMap is the lifted flat-map operator: each element d with weight w
// contributes every document of f(d) with weight w. It is linear and has no
// state. It implements Limited.
type FlatMap struct {
	f    FlatMapFunc
	size SizeFunc
	max  int
}

// NewFlatMap returns the lifted flat-map of f.
func NewFlatMap(f FlatMapFunc) *FlatMap { return &FlatMap{f: f} }

// WithSize sets the SizeFunc of f and returns fm.
func (fm *FlatMap) WithSize(size SizeFunc) *FlatMap {
	fm.size = size
	return fm
}

// SetMaxOutput implements Limited. A single f(d) is built whole before the
// bound is checked, so one step holds at most the limit plus one f(d).
func (fm *FlatMap) SetMaxOutput(n int) { fm.max = n }

// Step implements Operator.
func (fm *FlatMap) Step(delta *ZSet) (*ZSet, error) { return fm.run(delta, fm.max) }

func (fm *FlatMap) run(delta *ZSet, max int) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	exceeded := false
	delta.each(func(_ uint64, doc Document, w int) bool {
		res, err := fm.f(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		for _, r := range res {
			out.Insert(r, w)
		}
		exceeded = over(out, max)
		return !exceeded
	})
	if exceeded {
		le := &LimitError{Limit: max}
		if fm.size != nil {
			delta.each(func(_ uint64, doc Document, _ int) bool {
				le.Count += fm.size(doc)
				return true
			})
		}
		return nil, le
	}
	return out, errs.err()
}

// Snapshot implements Operator; for a linear operator it is Step, without
// the bound.
func (fm *FlatMap) Snapshot(input *ZSet) (*ZSet, error) { return fm.run(input, 0) }

// Reset implements Operator; FlatMap has no state.
func (fm *FlatMap) Reset() {}
