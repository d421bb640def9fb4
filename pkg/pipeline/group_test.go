package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// TestGroupMemberOrder: the values of @groupBy and @gather follow
// metadata.namespace, then metadata.name, whatever order the members
// arrive in, one at a time or together; a namespace that is a prefix of
// another sorts first.
func TestGroupMemberOrder(t *testing.T) {
	pods := []dbsp.Document{}
	var want []any
	for _, nn := range [][2]string{{"a", "x"}, {"a", "y"}, {"ab", "a"}, {"b", "a"}, {"b", "b"}} {
		pods = append(pods, dbsp.Document{"metadata": map[string]any{"namespace": nn[0], "name": nn[1]}, "spec": map[string]any{"g": "one"}})
		want = append(want, nn[0]+"/"+nn[1])
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ name, spec, path string }{
		{"groupBy", `{"@groupBy": ["$.spec.g", {"@concat": ["$.metadata.namespace", "/", "$.metadata.name"]}]}`, "values"},
		{"gather", `[{"@project": {"metadata": "$.metadata", "spec": "$.spec", "id": {"@concat": ["$.metadata.namespace", "/", "$.metadata.name"]}}},
			{"@gather": ["$.spec.g", "$.id"]}]`, "id"},
	} {
		for _, oneByOne := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/oneByOne=%v", tc.name, oneByOne), func(t *testing.T) {
				p, err := Compile(mustJSON(t, tc.spec), []string{"Pod"}, Options{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				shuffled := slices.Clone(pods)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				out := dbsp.NewIntegrate()
				var got *dbsp.ZSet
				if oneByOne {
					for _, pod := range shuffled {
						d, err := p.Process(map[string]*dbsp.ZSet{"Pod": dbsp.FromDocuments(pod)})
						if err != nil {
							t.Fatal(err)
						}
						got = out.Step(d)
					}
				} else {
					d, err := p.Process(map[string]*dbsp.ZSet{"Pod": dbsp.FromDocuments(shuffled...)})
					if err != nil {
						t.Fatal(err)
					}
					got = out.Step(d)
				}
				docs := got.Entries()
				if len(docs) != 1 {
					t.Fatalf("%d output documents, want 1", len(docs))
				}
				if values := docs[0].Doc[tc.path]; !dbsp.Equal(values, want) {
					t.Errorf("values %v, want %v", values, want)
				}
			})
		}
	}
}
