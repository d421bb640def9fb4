package expression_test

import (
	"encoding/json"
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

func ExampleParse() {
	var spec any
	_ = json.Unmarshal([]byte(`{
	  "metadata": {
	    "name": "$.metadata.name",
	    "annotations": {
	      "dcontroller.io/container-num": {"@string": {"@len": ["$.spec.containers"]}}
	    }
	  }
	}`), &spec)
	e, err := expression.Parse(spec, `spec.controllers[0].pipeline["@project"]`)
	if err != nil {
		panic(err)
	}
	pod := map[string]any{
		"metadata": map[string]any{"name": "my-pod"},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "c1"}, map[string]any{"name": "c2"}, map[string]any{"name": "c3"},
		}},
	}
	out, err := expression.Eval(e, pod)
	fmt.Println(out, err)
	// Output: map[metadata:map[annotations:map[dcontroller.io/container-num:3] name:my-pod]] <nil>
}

func ExampleParse_error() {
	spec := map[string]any{"name": map[string]any{"@frobnicate": "$.x"}}
	_, err := expression.Parse(spec, `spec.controllers[0].pipeline["@project"]`)
	fmt.Println(err)

	e, _ := expression.Parse(map[string]any{"@len": true}, "spec.x")
	_, err = expression.Eval(e, nil)
	fmt.Println(err)
	// Output:
	// spec.controllers[0].pipeline["@project"].name: unknown operator "@frobnicate"
	// spec.x["@len"]: @len: argument must be a list, string or map, got bool
}

func ExampleParse_listOperators() {
	spec := map[string]any{
		"@map": []any{
			map[string]any{"@concat": []any{"$$.name", "=", "$$.image"}},
			map[string]any{"@filter": []any{
				map[string]any{"@startswith": []any{"$$.image", "nginx"}},
				"$.spec.containers",
			}},
		},
	}
	e, _ := expression.Parse(spec, "")
	out, err := expression.Eval(e, map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "web", "image": "nginx:1.27"},
		map[string]any{"name": "sidecar", "image": "envoy:v1"},
	}}})
	fmt.Println(out, err)
	// Output: [web=nginx:1.27] <nil>
}

func ExampleParse_cel() {
	e, _ := expression.Parse(map[string]any{"@cel": "self.spec.replicas * 2"}, "")
	out, _ := expression.Eval(e, map[string]any{"spec": map[string]any{"replicas": 3}})
	fmt.Printf("%v %T\n", out, out)
	// Output: 6 int64
}

func ExampleParseSetter() {
	s, _ := expression.ParseSetter(`$.metadata.annotations["dcontroller.io/owner"]`)
	obj := map[string]any{"metadata": map[string]any{"name": "a"}}
	_ = s.Set(obj, "me")
	fmt.Println(obj)
	// Output: map[metadata:map[annotations:map[dcontroller.io/owner:me] name:a]]
}

func ExampleSingularPath() {
	e, _ := expression.Parse(map[string]any{"@eq": []any{"$.Pod.metadata.name", "$.Service.spec.podName"}}, "")
	op, args, _ := expression.Operator(e)
	left, root, ok := expression.SingularPath(args[0])
	fmt.Println(op, left, root, ok)
	// Output: @eq [Pod metadata name] $ true
}
