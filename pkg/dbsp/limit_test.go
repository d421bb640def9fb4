package dbsp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestJoinLimit checks that a join step over its bound fails without
// touching the integrals: the failed delta is dropped from the reference
// integrals too, and every later step still matches the snapshot.
func TestJoinLimit(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			const limit = 6
			r := rand.New(rand.NewPCG(seed, 3))
			a, b := newChanges(r, genDoc), newChanges(r, genDoc)
			j, out := NewJoin(keyK, keyK, pairDoc), NewIntegrate()
			j.SetMaxOutput(limit)
			failed := 0
			for step := 0; step < steps; step++ {
				da, db := a.next(), b.next()
				if r.IntN(2) == 0 {
					da.Add(a.next())
				}
				d, err := j.Step(da, db)
				var le *LimitError
				switch {
				case errors.As(err, &le):
					failed++
					if d != nil || le.Limit != limit {
						t.Fatalf("step %d: output %v and limit %d with a limit error", step, d, le.Limit)
					}
					a.live.AddScaled(da, -1)
					b.live.AddScaled(db, -1)
				case err != nil:
					t.Fatal(err)
				case d.Len() > limit:
					t.Fatalf("step %d: %d entries over the limit %d", step, d.Len(), limit)
				default:
					out.Step(d)
				}
				want, _ := j.Snapshot(a.live, b.live)
				mustEqual(t, step, "I(Step) vs Snapshot(I)", out.Value(), want)
			}
			if failed == 0 {
				t.Fatal("no step hit the limit; the test checks nothing")
			}
		})
	}
}

func TestFlatMapLimit(t *testing.T) {
	calls := 0
	fm := NewFlatMap(func(d Document) ([]Document, error) {
		calls++
		n := int(d["n"].(int64))
		out := make([]Document, n)
		for i := range out {
			out[i] = Document{"name": fmt.Sprint(d["name"], "-", i)}
		}
		return out, nil
	}).WithSize(func(d Document) int { return int(d["n"].(int64)) })
	in := NewZSet()
	for i := 0; i < 100; i++ {
		in.Insert(Document{"name": fmt.Sprint("d", i), "n": int64(1000)}, 1)
	}
	fm.SetMaxOutput(2500)
	out, err := fm.Step(in)
	var le *LimitError
	if !errors.As(err, &le) || out != nil {
		t.Fatalf("got %v, %v; want a limit error", out, err)
	}
	if le.Count != 100000 || le.Limit != 2500 {
		t.Fatalf("count %d limit %d, want 100000 and 2500", le.Count, le.Limit)
	}
	if calls != 3 {
		t.Fatalf("f called %d times, want 3: the step must stop at the limit", calls)
	}
	if got := le.Error(); got != "the step would emit 100000 entries, over the limit of 2500" {
		t.Fatalf("message %q", got)
	}
	// The snapshot is not bounded.
	if snap, err := fm.Snapshot(in); err != nil || snap.Len() != 100000 {
		t.Fatalf("snapshot: %d entries, %v", snap.Len(), err)
	}
	fm.SetMaxOutput(0)
	if out, err := fm.Step(in); err != nil || out.Len() != 100000 {
		t.Fatalf("unbounded: %d entries, %v", out.Len(), err)
	}
}

// TestStepUndo checks the property callers use to undo a step: after
// Step(Δ) and Step(-Δ) a stateful operator behaves as if neither happened,
// and the second step's output is the negated first output.
func TestStepUndo(t *testing.T) {
	ops := map[string]func() Operator{
		"distinct":        func() Operator { return NewDistinct() },
		"groupBy":         func() Operator { return NewGroupBy(keyK, memberV, sumAgg) },
		"groupBy nomembr": func() Operator { return NewGroupBy(keyK, nil, sumAgg) },
	}
	for name, newOp := range ops {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 4))
				in := newChanges(r, genDoc)
				op, ref := newOp(), newOp()
				for step := 0; step < steps; step++ {
					delta := in.next()
					if r.IntN(3) == 0 {
						d1, _ := op.Step(delta)
						d2, _ := op.Step(delta.Negate())
						mustEqual(t, step, "undo output", d2, d1.Negate())
					}
					got, _ := op.Step(delta)
					want, _ := ref.Step(delta)
					mustEqual(t, step, "after undo", got, want)
				}
			})
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("join/seed%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 5))
			a, b := newChanges(r, genDoc), newChanges(r, genDoc)
			j, ref := NewJoin(keyK, keyK, pairDoc), NewJoin(keyK, keyK, pairDoc)
			for step := 0; step < steps; step++ {
				da, db := a.next(), b.next()
				if r.IntN(3) == 0 {
					d1, _ := j.Step(da, db)
					d2, _ := j.Step(da.Negate(), db.Negate())
					mustEqual(t, step, "undo output", d2, d1.Negate())
				}
				got, _ := j.Step(da, db)
				want, _ := ref.Step(da, db)
				mustEqual(t, step, "after undo", got, want)
			}
		})
	}
}
