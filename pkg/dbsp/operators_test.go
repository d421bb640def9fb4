package dbsp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var seeds = []uint64{1, 2, 3, 42, 2024}

const steps = 300

// maxLive is the size around which the random integrals hover.
const maxLive = 40

// changes generates random change streams over a small document domain:
// inserts, updates (delete old + insert new) and deletes of live documents,
// several per step, so duplicates and simultaneous changes occur.
type changes struct {
	r    *rand.Rand
	live *ZSet // the integral of the stream so far
	gen  func(r *rand.Rand) Document
}

func newChanges(r *rand.Rand, gen func(*rand.Rand) Document) *changes {
	return &changes{r: r, live: NewZSet(), gen: gen}
}

func (c *changes) pick() (Entry, bool) {
	if c.live.IsEmpty() {
		return Entry{}, false
	}
	i := c.r.IntN(c.live.Len())
	var e Entry
	c.live.Range(func(doc Document, w int) bool {
		e = Entry{Doc: doc, Weight: w}
		i--
		return i >= 0
	})
	return e, true
}

// next returns the delta of one step and adds it to the integral.
func (c *changes) next() *ZSet {
	delta := NewZSet()
	for n := 1 + c.r.IntN(3); n > 0; n-- {
		switch op := c.r.IntN(10); {
		case c.live.Len() < 3 || (op < 4 && c.live.Len() < maxLive): // insert
			delta.Insert(c.gen(c.r), 1)
		case op < 7: // update
			if old, ok := c.pick(); ok && old.Weight > 0 && delta.Weight(old.Doc) >= 0 {
				delta.Insert(old.Doc, -1)
				delta.Insert(c.gen(c.r), 1)
			}
		default: // delete
			if old, ok := c.pick(); ok && old.Weight > 0 && delta.Weight(old.Doc) >= 0 {
				delta.Insert(old.Doc, -1)
			}
		}
	}
	c.live.Add(delta)
	return delta
}

// anyChanges also produces negative and large weights: general Z-set streams.
func (c *changes) anyNext() *ZSet {
	delta := NewZSet()
	for n := c.r.IntN(4); n > 0; n-- {
		if old, ok := c.pick(); ok && c.r.IntN(maxLive) < c.live.Len() {
			delta.Insert(old.Doc, -old.Weight) // keeps the integral small
			continue
		}
		delta.Insert(c.gen(c.r), c.r.IntN(5)-2)
	}
	c.live.Add(delta)
	return delta
}

func genDoc(r *rand.Rand) Document {
	d := Document{
		"name": fmt.Sprintf("n%d", r.IntN(12)),
		"k":    int64(r.IntN(4)),
		"v":    int64(r.IntN(3)),
	}
	if r.IntN(3) == 0 {
		d["k"] = float64(r.IntN(4)) // numerically equal keys of another type
	}
	if r.IntN(4) == 0 {
		d["tags"] = []any{"a", string(rune('a' + r.IntN(3)))}
	}
	return d
}

func mustEqual(t *testing.T, step int, what string, got, want *ZSet) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("step %d: %s:\n got %v\nwant %v", step, what, got, want)
	}
}

// checkUnary runs the property test of a unary incremental operator: the
// integral of its output equals its snapshot of the integrated input.
func checkUnary(t *testing.T, newOp func() Operator, general bool) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 0))
			in := newChanges(r, genDoc)
			op, out := newOp(), NewIntegrate()
			for step := 0; step < steps; step++ {
				var delta *ZSet
				if general {
					delta = in.anyNext()
				} else {
					delta = in.next()
				}
				d, err := op.Step(delta)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				want, err := newOp().Snapshot(in.live)
				if err != nil {
					t.Fatalf("snapshot: %v", err)
				}
				mustEqual(t, step, "I(Step) vs Snapshot(I)", out.Step(d), want)
			}
			op.Reset()
			d, _ := op.Step(in.live)
			want, _ := op.Snapshot(in.live)
			mustEqual(t, -1, "after Reset", d, want)
		})
	}
}

func TestDistinctProperty(t *testing.T) {
	checkUnary(t, func() Operator { return NewDistinct() }, true)
	checkUnary(t, func() Operator { return NewDistinct() }, false)
}

func TestMapProperty(t *testing.T) {
	// Map collapses documents: weights of equal results add up.
	checkUnary(t, func() Operator {
		return NewMap(func(d Document) (Document, error) {
			return Document{"k": d["k"], "odd": d["v"] == int64(1)}, nil
		})
	}, true)
}

func TestFilterProperty(t *testing.T) {
	checkUnary(t, func() Operator {
		return NewFilter(func(d Document) (bool, error) { return d["v"] != int64(0), nil })
	}, false)
}

func TestFlatMapProperty(t *testing.T) {
	checkUnary(t, func() Operator {
		return NewFlatMap(func(d Document) ([]Document, error) {
			tags, _ := d["tags"].([]any)
			out := make([]Document, 0, len(tags))
			for i, tag := range tags {
				out = append(out, Document{"name": fmt.Sprint(d["name"], "-", i), "tag": tag})
			}
			return out, nil
		})
	}, false)
}

// sumAgg aggregates a group into its sorted names and its weighted sum of
// v, taken from the member values of memberV when they are set.
func sumAgg(key any, members []Member) (Document, error) {
	var names []string
	var sum int64
	for _, m := range members {
		if m.Weight <= 0 {
			continue
		}
		names = append(names, fmt.Sprintf("%s*%d", m.Doc["name"], m.Weight))
		v, ok := m.Value.(int64)
		if !ok {
			v = m.Doc["v"].(int64)
		}
		sum += v * int64(m.Weight)
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	return Document{"key": key, "names": strings.Join(names, ","), "sum": sum}, nil
}

func memberV(d Document) (any, error) { return d["v"], nil }

func keyK(d Document) (any, error) { return d["k"], nil }

func TestGroupByProperty(t *testing.T) {
	checkUnary(t, func() Operator { return NewGroupBy(keyK, nil, sumAgg) }, false)
	checkUnary(t, func() Operator { return NewGroupBy(keyK, memberV, sumAgg) }, true)
}

// nestedLoopJoin is the reference join: every pair, keys compared with Equal.
func nestedLoopJoin(a, b *ZSet, ka, kb KeyFunc, f JoinFunc) *ZSet {
	out := NewZSet()
	a.Range(func(l Document, wl int) bool {
		b.Range(func(r Document, wr int) bool {
			if ka != nil {
				x, _ := ka(l)
				y, _ := kb(r)
				if !Equal(x, y) {
					return true
				}
			}
			if d, ok, _ := f(l, r); ok {
				out.Insert(d, wl*wr)
			}
			return true
		})
		return true
	})
	return out
}

// pairDoc is selective on its own, so that the nested loop join's output
// stays small; with the k index it is the full condition of the equi-join.
func pairDoc(l, r Document) (Document, bool, error) {
	return Document{"l": l, "r": r}, Equal(l["k"], r["k"]) && l["v"] != r["v"], nil
}

func TestJoinProperty(t *testing.T) {
	cases := []struct {
		name   string
		ka, kb KeyFunc
	}{
		{"indexed", keyK, keyK},
		{"nested loop", nil, nil},
	}
	for _, tc := range cases {
		for _, general := range []bool{false, true} {
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("%s/general=%v/seed%d", tc.name, general, seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, 1))
					a, b := newChanges(r, genDoc), newChanges(r, genDoc)
					j, out := NewJoin(tc.ka, tc.kb, pairDoc), NewIntegrate()
					for step := 0; step < steps; step++ {
						var da, db *ZSet
						switch r.IntN(3) {
						case 0:
							da, db = a.next(), NewZSet()
						case 1:
							da, db = NewZSet(), b.next()
						default: // both sides change in one step
							da, db = a.next(), b.next()
						}
						if general {
							da.Add(a.anyNext())
							db.Add(b.anyNext())
						}
						d, err := j.Step(da, db)
						if err != nil {
							t.Fatal(err)
						}
						want, err := j.Snapshot(a.live, b.live)
						if err != nil {
							t.Fatal(err)
						}
						if step%10 == 0 {
							mustEqual(t, step, "Snapshot vs nested loop", want, nestedLoopJoin(a.live, b.live, tc.ka, tc.kb, pairDoc))
						}
						mustEqual(t, step, "I(Step) vs Snapshot(I)", out.Step(d), want)
					}
				})
			}
		}
	}
}

func TestJoinIndexedWork(t *testing.T) {
	calls := 0
	j := NewJoin(keyK, keyK, func(l, r Document) (Document, bool, error) {
		calls++
		return Document{"l": l, "r": r}, true, nil
	})
	left := NewZSet()
	for i := 0; i < 1000; i++ {
		left.Insert(Document{"name": fmt.Sprint(i), "k": int64(i)}, 1)
	}
	if _, err := j.Step(left, NewZSet()); err != nil {
		t.Fatal(err)
	}
	out, err := j.Step(NewZSet(), FromDocuments(Document{"k": int64(7)}))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || out.Len() != 1 {
		t.Fatalf("a keyed change tested %d pairs and produced %d outputs, want 1 and 1", calls, out.Len())
	}
}

func TestStreamOperators(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	in := newChanges(r, genDoc)
	i, d, z := NewIntegrate(), NewDifferentiate(), NewDelay()
	di, id := NewDifferentiate(), NewIntegrate()
	prev := NewZSet()
	for step := 0; step < steps; step++ {
		delta := in.anyNext()
		integral := i.Step(delta)
		mustEqual(t, step, "I", integral, in.live)
		mustEqual(t, step, "D(I(x)) = x", di.Step(integral), delta)
		mustEqual(t, step, "I(D(x)) = x", id.Step(d.Step(delta)).Clone(), delta)
		// Reset the inner integrator so that I(D(x)) is checked per value, not as a sum.
		id.Reset()
		d.Reset()
		mustEqual(t, step, "z^-1", z.Step(delta), prev)
		prev = delta
	}
	i.Reset()
	if !i.Value().IsEmpty() {
		t.Fatal("Integrate.Reset")
	}
}

func TestOperatorErrors(t *testing.T) {
	boom := errors.New("boom")
	in := FromDocuments(doc("a", int64(1)), doc("b", int64(2)), doc("c", int64(3)))
	failOnB := func(d Document) error {
		if d["name"] == "b" {
			return boom
		}
		if d["name"] == "c" {
			return ErrSkip
		}
		return nil
	}
	ops := map[string]Operator{
		"map": NewMap(func(d Document) (Document, error) { return d, failOnB(d) }),
		"filter": NewFilter(func(d Document) (bool, error) {
			return true, failOnB(d)
		}),
		"flatmap": NewFlatMap(func(d Document) ([]Document, error) { return []Document{d}, failOnB(d) }),
		"groupBy": NewGroupBy(func(d Document) (any, error) { return d["name"], failOnB(d) }, nil,
			func(_ any, ms []Member) (Document, error) { return ms[0].Doc, nil }),
		"groupBy member": NewGroupBy(keyK, func(d Document) (any, error) { return nil, failOnB(d) },
			func(_ any, ms []Member) (Document, error) { return ms[0].Doc, nil }),
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			out, err := op.Step(in)
			if !errors.Is(err, boom) {
				t.Fatalf("error %v does not wrap boom", err)
			}
			if !out.Equal(FromDocuments(doc("a", int64(1)))) {
				t.Fatalf("output %v, want only a", out)
			}
			// The failing document fails again on delete: state stays consistent.
			out, _ = op.Step(in.Negate())
			if !out.Equal(FromDocuments(doc("a", int64(1))).Negate()) {
				t.Fatalf("retraction %v", out)
			}
		})
	}
	j := NewJoin(func(d Document) (any, error) { return nil, failOnB(d) }, keyK,
		func(l, r Document) (Document, bool, error) { return l, true, nil })
	out, err := j.Step(in, FromDocuments(Document{}))
	if !errors.Is(err, boom) || out.Len() != 1 {
		t.Fatalf("join: %v %v", out, err)
	}
	many := NewZSet()
	for i := 0; i < 50; i++ {
		many.Insert(doc("b", int64(i)), 1)
	}
	_, err = NewMap(func(d Document) (Document, error) { return nil, boom }).Step(many)
	if err == nil || !strings.Contains(err.Error(), "and 40 more errors") {
		t.Fatalf("errors not capped: %v", err)
	}
}
