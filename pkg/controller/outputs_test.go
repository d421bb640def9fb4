package controller

import (
	"math/rand/v2"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// An outputSet holds what a dbsp.ZSet given the same insertions holds, in
// the same order, through promotions to a Z-set and back.
func TestOutputSetMatchesZSet(t *testing.T) {
	docs := []dbsp.Document{
		{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"v": int64(1)}},
		{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"v": int64(2)}},
		{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"v": float64(2)}}, // equal to the one before
		{"metadata": map[string]any{"name": "a"}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 200; run++ {
		var o outputSet
		z := dbsp.NewZSet()
		for step := 0; step < 30; step++ {
			d := docs[r.IntN(len(docs))]
			w := r.IntN(5) - 2
			o.insert(d, w)
			z.Insert(d, w)
			got, want := o.entries(), z.Entries()
			if len(got) != len(want) || o.empty() != z.IsEmpty() {
				t.Fatalf("run %d step %d: outputSet %v, Z-set %v", run, step, got, want)
			}
			for i := range got {
				if got[i].Weight != want[i].Weight || !dbsp.Equal(got[i].Doc, want[i].Doc) {
					t.Fatalf("run %d step %d: outputSet %v, Z-set %v", run, step, got, want)
				}
			}
		}
	}
}
