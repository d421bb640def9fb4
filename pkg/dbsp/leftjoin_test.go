package dbsp

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func padDoc(l Document) (Document, error) { return Document{"l": l, "r": nil}, nil }

// nestedLoopLeftJoin is the reference left join: the reference join plus
// every left document whose matching right weights sum to zero, padded.
func nestedLoopLeftJoin(a, b *ZSet, ka, kb KeyFunc, f JoinFunc) *ZSet {
	out := nestedLoopJoin(a, b, ka, kb, f)
	a.Range(func(l Document, wl int) bool {
		m := 0
		b.Range(func(r Document, wr int) bool {
			if ka != nil {
				x, _ := ka(l)
				y, _ := kb(r)
				if !Equal(x, y) {
					return true
				}
			}
			if _, ok, _ := f(l, r); ok {
				m += wr
			}
			return true
		})
		if m == 0 {
			p, _ := padDoc(l)
			out.Insert(p, wl)
		}
		return true
	})
	return out
}

// TestLeftJoinProperty checks the incremental left join against its
// snapshot twin, and the snapshot against a nested loop, on random change
// sequences of both sides (sets, and general Z-sets with negative weights).
func TestLeftJoinProperty(t *testing.T) {
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
					r := rand.New(rand.NewPCG(seed, 7))
					a, b := newChanges(r, genDoc), newChanges(r, genDoc)
					j, out := NewLeftJoin(tc.ka, tc.kb, pairDoc, padDoc), NewIntegrate()
					for step := 0; step < steps; step++ {
						var da, db *ZSet
						switch r.IntN(3) {
						case 0:
							da, db = a.next(), NewZSet()
						case 1:
							da, db = NewZSet(), b.next()
						default:
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
							mustEqual(t, step, "Snapshot vs nested loop", want, nestedLoopLeftJoin(a.live, b.live, tc.ka, tc.kb, pairDoc))
						}
						mustEqual(t, step, "I(Step) vs Snapshot(I)", out.Step(d), want)
					}
					j.Reset()
					d, _ := j.Step(a.live, b.live)
					want, _ := j.Snapshot(a.live, b.live)
					mustEqual(t, -1, "after Reset", d, want)
				})
			}
		}
	}
}

// TestLeftJoinRetract follows one left document through its partner's
// arrival and departure: padded, retracted when matched, padded again.
func TestLeftJoinRetract(t *testing.T) {
	j := NewLeftJoin(keyK, keyK, func(l, r Document) (Document, bool, error) {
		return Document{"l": l, "r": r}, true, nil
	}, padDoc)
	svc := Document{"k": int64(1)}
	pod := Document{"k": int64(1), "name": "p"}
	steps := []struct {
		dl, dr *ZSet
		want   *ZSet
	}{
		{FromDocuments(svc), NewZSet(), FromDocuments(Document{"l": svc, "r": nil})},
		{NewZSet(), FromDocuments(pod), func() *ZSet {
			z := FromDocuments(Document{"l": svc, "r": pod})
			z.Insert(Document{"l": svc, "r": nil}, -1)
			return z
		}()},
		{NewZSet(), FromDocuments(pod).Negate(), func() *ZSet {
			z := FromDocuments(Document{"l": svc, "r": nil})
			z.Insert(Document{"l": svc, "r": pod}, -1)
			return z
		}()},
	}
	for i, s := range steps {
		got, err := j.Step(s.dl, s.dr)
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, i, "step", got, s.want)
	}
}
