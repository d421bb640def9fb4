package operator

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
)

// FuzzNamespaceSharded checks the rule behind spec.sharding Namespace: for
// every pipeline that pipeline.NamespaceLocal accepts, running it
// separately over the objects of each namespace (as each member of a ring
// does over its namespaces, with the same changes in the same order) gives
// outputs only in that namespace, and together exactly the outputs of one
// run over everything.
func FuzzNamespaceSharded(f *testing.F) {
	// A namespace-keyed @gather, a join tied by namespace, and plain
	// stages.
	f.Add([]byte{1, 1, 7, 0, 0, 1, 0, 1, 3, 1, 2, 2, 0, 0, 1, 1, 1, 3, 1, 2, 2, 1, 1, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 1, 0, 1, 0, 0, 1, 0xff, 1, 0, 1, 0, 1, 2, 1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 2, 1, 2})
	f.Add([]byte{2, 2, 2, 3, 0, 1, 1, 0, 2, 0x1f, 1, 1, 0, 0, 1, 2, 2, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		fc, err := decodeFuzz(data)
		if err != nil || fc.patcher || len(fc.existing) > 0 {
			// A Patcher target of the fuzz cases is in namespace ns0
			// whatever its sources: not namespace-local by construction.
			return
		}
		spec := fc.op.Spec.Controllers[0]
		var raw any
		if err := json.Unmarshal(spec.Pipeline.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, s := range spec.Sources {
			kinds = append(kinds, s.Kind)
		}
		opts := pipeline.Options{Path: "spec.controllers[0].pipeline", Dialect: controller.DialectOf(spec)}
		if len(spec.Targets) > 0 {
			for _, t := range spec.Targets {
				name := t.Name
				if name == "" {
					name = t.Kind
				}
				opts.Outputs = append(opts.Outputs, name)
			}
		}
		p, err := pipeline.Compile(raw, kinds, opts)
		if err != nil {
			t.Fatalf("pipeline does not compile: %v\n%s", err, spec.Pipeline.Raw)
		}
		if p.NamespaceLocal() != nil {
			return
		}
		whole := runFuzz(t, fc, changeSteps(fc.changes), true)
		var union []map[string]any
		for _, ns := range []string{"ns0", "ns1"} {
			var mine []*unstructured.Unstructured
			for _, u := range fc.changes {
				if u.GetNamespace() == ns {
					mine = append(mine, u)
				}
			}
			for _, out := range runFuzz(t, fc, changeSteps(mine), true) {
				md, _ := out["metadata"].(map[string]any)
				if got, _ := md["namespace"].(string); got != ns {
					t.Fatalf("the run over namespace %s wrote into namespace %q (accepted as namespace-local)\npipeline: %s\noutput: %v", ns, got, spec.Pipeline.Raw, out)
				}
				union = append(union, out)
			}
		}
		key := func(m map[string]any) string { b, _ := json.Marshal(m); return string(b) }
		sort.Slice(union, func(i, j int) bool { return key(union[i]) < key(union[j]) })
		sort.Slice(whole, func(i, j int) bool { return key(whole[i]) < key(whole[j]) })
		if !reflect.DeepEqual(union, whole) {
			g, _ := json.MarshalIndent(union, "", "  ")
			w, _ := json.MarshalIndent(whole, "", "  ")
			t.Fatalf("the namespaces' runs together differ from one run over everything\npipeline: %s\nper namespace:\n%s\nwhole:\n%s", spec.Pipeline.Raw, g, w)
		}
	})
}
