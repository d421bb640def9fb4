package pipeline_test

import (
	"encoding/json"
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
)

func Example() {
	var spec any
	_ = json.Unmarshal([]byte(`[
	  {"@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}},
	  {"@project": {
	    "metadata": {"name": "$.Pod.metadata.name", "namespace": "$.Pod.metadata.namespace"},
	    "service": "$.Service.metadata.name"
	  }}
	]`), &spec)
	p, err := pipeline.Compile(spec, []string{"Pod", "Service"}, pipeline.Options{Path: "spec.controllers[0].pipeline"})
	if err != nil {
		panic(err)
	}
	pod := func(name, app string) dbsp.Document {
		return dbsp.Document{"metadata": map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": app}}}
	}
	svc := dbsp.Document{"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"selector": map[string]any{"app": "web"}}}

	out, _ := p.Process(map[string]*dbsp.ZSet{
		"Pod":     dbsp.FromDocuments(pod("web-0", "web"), pod("db-0", "db")),
		"Service": dbsp.FromDocuments(svc),
	})
	fmt.Println(out)

	// Relabel web-0: the output changes by a deletion only.
	relabel := dbsp.NewZSet()
	relabel.Insert(pod("web-0", "web"), -1)
	relabel.Insert(pod("web-0", "db"), 1)
	out, _ = p.Process(map[string]*dbsp.ZSet{"Pod": relabel})
	fmt.Println(out)
	// Output:
	// {map[metadata:map[name:web-0 namespace:default] service:web]: +1}
	// {map[metadata:map[name:web-0 namespace:default] service:web]: -1}
}

func ExampleCompile_error() {
	spec := []any{map[string]any{"@select": true}, map[string]any{"@frobnicate": map[string]any{}}}
	_, err := pipeline.Compile(spec, []string{"Pod"}, pipeline.Options{Path: "spec.controllers[0].pipeline"})
	fmt.Println(err)
	// Output: spec.controllers[0].pipeline[1]: unknown pipeline stage "@frobnicate"
}
