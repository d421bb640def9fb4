package dbsp

import (
	"math/rand/v2"
	"testing"
)

func doc(name string, v any) Document { return Document{"name": name, "v": v} }

func TestZSetBasics(t *testing.T) {
	z := NewZSet()
	if !z.IsEmpty() || z.Len() != 0 {
		t.Fatal("new Z-set not empty")
	}
	z.Insert(doc("a", int64(1)), 1)
	z.Insert(doc("a", 1.0), 2) // the same document
	z.Insert(doc("b", int64(1)), -1)
	z.Insert(doc("c", int64(1)), 0)
	if z.Len() != 2 {
		t.Fatalf("Len = %d, want 2: %v", z.Len(), z)
	}
	if w := z.Weight(doc("a", int64(1))); w != 3 {
		t.Fatalf("Weight(a) = %d, want 3", w)
	}
	z.Insert(doc("b", int64(1)), 1)
	if z.Len() != 1 || z.Weight(doc("b", int64(1))) != 0 {
		t.Fatalf("zero weight did not vanish: %v", z)
	}
	n := z.Negate()
	if n.Weight(doc("a", int64(1))) != -3 || z.Weight(doc("a", int64(1))) != 3 {
		t.Fatal("Negate wrong or modified its receiver")
	}
	if !z.Plus(n).IsEmpty() {
		t.Fatal("z + -z is not empty")
	}
	c := z.Clone()
	c.Insert(doc("d", nil), 1)
	if z.Len() != 1 || c.Len() != 2 {
		t.Fatal("Clone shares state")
	}
	if !c.Minus(z).Equal(FromDocuments(doc("d", nil))) {
		t.Fatalf("Minus = %v", c.Minus(z))
	}
	z.Add(z)
	if z.Weight(doc("a", int64(1))) != 6 {
		t.Fatal("z.Add(z) did not double")
	}
	z.AddScaled(z, -1)
	if !z.IsEmpty() {
		t.Fatal("z.AddScaled(z, -1) is not empty")
	}
}

func TestZSetEntriesDeterministic(t *testing.T) {
	z := NewZSet()
	for _, n := range []string{"c", "a", "b", "e", "d"} {
		z.Insert(doc(n, int64(0)), 1)
	}
	z.Insert(doc("a", int64(0)), 1)
	got := z.Entries()
	want := []string{"a", "b", "c", "d", "e"}
	for i, e := range got {
		if e.Doc["name"] != want[i] {
			t.Fatalf("Entries()[%d] = %v, want name %s", i, e.Doc, want[i])
		}
	}
	if got[0].Weight != 2 {
		t.Fatalf("weight of a = %d", got[0].Weight)
	}
	if docs := z.Documents(); len(docs) != 6 {
		t.Fatalf("Documents() has %d elements, want 6", len(docs))
	}
}

// TestZSetCollisions forces documents into one hash bucket.
func TestZSetCollisions(t *testing.T) {
	z := NewZSet()
	a, b, c := doc("a", nil), doc("b", nil), doc("c", nil)
	const h = 42
	z.insertHashed(h, a, 1)
	z.insertHashed(h, b, 2)
	z.insertHashed(h, c, 3)
	if z.Len() != 3 || z.weightHashed(h, a) != 1 || z.weightHashed(h, b) != 2 || z.weightHashed(h, c) != 3 {
		t.Fatalf("collision bucket wrong: %v", z)
	}
	z.insertHashed(h, a, -1) // removes the primary: an overflow entry is promoted
	if z.Len() != 2 || z.weightHashed(h, a) != 0 || z.weightHashed(h, b) != 2 || z.weightHashed(h, c) != 3 {
		t.Fatalf("after removing primary: %v", z)
	}
	z.insertHashed(h, b, -2)
	z.insertHashed(h, c, 1)
	if z.Len() != 1 || z.weightHashed(h, c) != 4 {
		t.Fatalf("after removing overflow: %v", z)
	}
	z.insertHashed(h, c, -4)
	if !z.IsEmpty() || len(z.m) != 0 || len(z.over) != 0 {
		t.Fatalf("not empty: %v", z)
	}

	var vm valueMap[int]
	vm.put(h, "x", 1)
	vm.put(h, "y", 2)
	vm.put(h, "x", 3)
	if v, _ := vm.get(h, "x"); v != 3 || vm.len() != 2 {
		t.Fatal("valueMap update in collision bucket")
	}
	vm.del(h, "x")
	if _, ok := vm.get(h, "x"); ok {
		t.Fatal("valueMap del")
	}
	if v, _ := vm.get(h, "y"); v != 2 || vm.len() != 1 {
		t.Fatal("valueMap promotion")
	}
}

// TestZSetModel checks a Z-set against a plain map of weights under random
// insertions with forced hash collisions, across the move from the inline
// array to the maps and back to few elements: weights, Len, the elements
// each enumerates, Clone and in-place scaling.
func TestZSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	hashOf := func(name string) uint64 { return uint64(name[0] % 3) } // many collisions
	for round := 0; round < 200; round++ {
		z := NewZSet()
		model := map[string]int{}
		for step := 0; step < 60; step++ {
			name := names[rng.IntN(len(names))]
			w := rng.IntN(5) - 2
			if model[name] != 0 && rng.IntN(3) == 0 {
				w = -model[name] // remove it
			}
			z.insertHashed(hashOf(name), doc(name, nil), w)
			model[name] += w
			if model[name] == 0 {
				delete(model, name)
			}
			check := func(what string, z *ZSet, model map[string]int) {
				t.Helper()
				if z.Len() != len(model) {
					t.Fatalf("round %d step %d %s: Len %d, want %d", round, step, what, z.Len(), len(model))
				}
				for _, n := range names {
					if got := z.weightHashed(hashOf(n), doc(n, nil)); got != model[n] {
						t.Fatalf("round %d step %d %s: weight of %s %d, want %d", round, step, what, n, got, model[n])
					}
				}
				seen := map[string]int{}
				z.each(func(h uint64, d Document, w int) bool {
					n := d["name"].(string)
					if h != hashOf(n) || w == 0 {
						t.Fatalf("%s: element %s with hash %d weight %d", what, n, h, w)
					}
					seen[n] += w
					return true
				})
				if len(seen) != len(model) {
					t.Fatalf("round %d step %d %s: each gave %v, want %v", round, step, what, seen, model)
				}
				for n, w := range model {
					if seen[n] != w {
						t.Fatalf("round %d step %d %s: each gave %v, want %v", round, step, what, seen, model)
					}
				}
			}
			check("z", z, model)
			if step%10 == 9 {
				c := z.Clone()
				check("clone", c, model)
				c.scale(-3)
				scaled := map[string]int{}
				for n, w := range model {
					scaled[n] = -3 * w
				}
				check("scaled clone", c, scaled)
				check("z after scaling its clone", z, model)
			}
		}
	}
}
