package dbsp_test

import (
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

func ExampleZSet() {
	z := dbsp.NewZSet()
	z.Insert(dbsp.Document{"name": "a"}, 1)
	z.Insert(dbsp.Document{"name": "b"}, 2)
	z.Insert(dbsp.Document{"name": "a"}, -1) // weights add up; zero vanishes
	for _, e := range z.Entries() {
		fmt.Println(e.Doc, e.Weight)
	}
	// Output: map[name:b] 2
}

// ExampleJoin joins pods with the services selecting them, incrementally:
// each Step returns only the change of the join.
func ExampleJoin() {
	app := func(path ...string) dbsp.KeyFunc {
		return func(d dbsp.Document) (any, error) {
			var v any = d
			for _, p := range path {
				m, _ := v.(map[string]any)
				v = m[p]
			}
			return v, nil
		}
	}
	j := dbsp.NewJoin(app("labels", "app"), app("selector", "app"),
		func(pod, svc dbsp.Document) (dbsp.Document, bool, error) {
			return dbsp.Document{"pod": pod["name"], "svc": svc["name"]}, true, nil
		})
	pods := dbsp.FromDocuments(
		dbsp.Document{"name": "web-0", "labels": map[string]any{"app": "web"}},
		dbsp.Document{"name": "db-0", "labels": map[string]any{"app": "db"}},
	)
	svcs := dbsp.FromDocuments(dbsp.Document{"name": "web", "selector": map[string]any{"app": "web"}})
	out, _ := j.Step(pods, svcs)
	fmt.Println(out)

	// A new pod is matched against the indexed services only.
	out, _ = j.Step(dbsp.FromDocuments(dbsp.Document{"name": "web-1", "labels": map[string]any{"app": "web"}}), nil)
	fmt.Println(out)
	// Output:
	// {map[pod:web-0 svc:web]: +1}
	// {map[pod:web-1 svc:web]: +1}
}

func ExampleDistinct() {
	d := dbsp.NewDistinct()
	doc := dbsp.Document{"app": "web"}
	out, _ := d.Step(dbsp.FromDocuments(doc, doc)) // weight 2: present once
	fmt.Println(out)
	out, _ = d.Step(dbsp.FromDocuments(doc).Negate()) // weight 1: no change
	fmt.Println(out)
	out, _ = d.Step(dbsp.FromDocuments(doc).Negate()) // weight 0: gone
	fmt.Println(out)
	// Output:
	// {map[app:web]: +1}
	// {}
	// {map[app:web]: -1}
}
