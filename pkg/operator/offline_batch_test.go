package operator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/rgd"

	"github.com/dcontroller/dcontroller/pkg/object"
)

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func resultDocs(off *Offline) []map[string]any {
	var out []map[string]any
	for _, u := range off.Result() {
		out = append(out, u.Object)
	}
	return out
}

// ApplyAll reaches the state Apply reaches object by object, on every
// operator example (inputs with updates and deletions of the same objects
// included) and on a chain of controllers through a view.
func TestApplyAllEqualsApplyOneByOne(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*/input.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, in := range dirs {
		dir := filepath.Dir(in)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ctx := context.Background()
			opYAML := readFile(t, filepath.Join(dir, "operator.yaml"))
			objs := input(t, readFile(t, in))
			versions := map[string]string{}
			for _, o := range objs {
				versions[o.GroupVersionKind().Group+"/"+o.GetKind()] = o.GroupVersionKind().Version
			}
			one := exampleOffline(t, opYAML, OfflineOptions{Versions: versions, StatusSubresource: InputStatusSubresource(objs)})
			if err := one.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := one.Apply(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			all := exampleOffline(t, opYAML, OfflineOptions{Versions: versions, StatusSubresource: InputStatusSubresource(objs)})
			if err := all.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := all.ApplyAll(ctx, objs); err != nil {
				t.Fatal(err)
			}
			a, b := resultDocs(one), resultDocs(all)
			if len(a) == 0 {
				t.Fatal("the example produced no output")
			}
			if len(a) != len(b) {
				t.Fatalf("one by one: %d objects, all at once: %d", len(a), len(b))
			}
			for i := range a {
				if !object.Equal(a[i], b[i]) {
					t.Errorf("object %d differs:\none by one: %v\nall at once: %v", i, a[i], b[i])
				}
			}
		})
	}
}

// ApplyAll reports a bad object and still applies the others.
func TestApplyAllKeepsGoodObjects(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: copy}
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline: {"@project": {metadata: "$.metadata", data: "$.data"}}
      target: {kind: Copy}
`, OfflineOptions{})
	objs := input(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: good, namespace: ns}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: Bad_Name, namespace: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: gone, namespace: ns, deletionTimestamp: "2026-01-01T00:00:00Z"}
`)
	err := off.ApplyAll(context.Background(), objs)
	if err == nil || !strings.Contains(err.Error(), "Bad_Name") || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("want errors naming Bad_Name and the missing gone, got %v", err)
	}
	res := off.Result()
	if len(res) != 1 || res[0].GetName() != "good" {
		t.Fatalf("want only the copy of good, got %v", res)
	}
}

const groupOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: gb}
spec:
  controllers:
    - name: gb
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        - "@groupBy": ["$.metadata.namespace", "$.metadata.name"]
        - "@project": {metadata: {name: all, namespace: default}, members: "$.values"}
      target: {kind: Group}
`

func groupPods(n int) []*unstructured.Unstructured {
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": fmt.Sprintf("p%d", i), "namespace": "default"},
			"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}},
		}}
	}
	return objs
}

// BenchmarkOfflineGroupLoad measures what `dctl eval` pays to load N Pods
// into one @groupBy group: store writes, the controller, the pipeline and
// the target write of the group. The cost per load should grow like
// N log N (ratio 32k/2k well under 20×), not N².
func BenchmarkOfflineGroupLoad(b *testing.B) {
	for _, n := range []int{2000, 8000, 32000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			ops, err := DecodeOperators(strings.NewReader(groupOperator))
			if err != nil {
				b.Fatal(err)
			}
			pods := groupPods(n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				off, err := NewOffline(ops, OfflineOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if err := off.ApplyAll(context.Background(), pods); err != nil {
					b.Fatal(err)
				}
				res := off.Result()
				if len(res) != 1 || len(res[0].Object["members"].([]any)) != n {
					b.Fatalf("want one group of %d members", n)
				}
			}
		})
	}
}

// exampleOffline is mustOffline for an example's operator.yaml, which may
// hold ResourceGraphDefinitions: each runs as the Operator it compiles to
// (rgd.Compile), as dctl eval runs it.
func exampleOffline(t *testing.T, y string, opts OfflineOptions) *Offline {
	t.Helper()
	objs, err := DecodeObjects(strings.NewReader(y))
	if err != nil {
		t.Fatal(err)
	}
	var ops []*opv1a1.Operator
	for _, obj := range objs {
		if obj.GetKind() != "ResourceGraphDefinition" {
			continue
		}
		r := &krov1a1.ResourceGraphDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, r); err != nil {
			t.Fatal(err)
		}
		c, err := rgd.Compile(r)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, c.Operator)
	}
	if len(ops) == 0 {
		return mustOffline(t, y, opts)
	}
	off, err := NewOffline(ops, opts)
	if err != nil {
		t.Fatal(err)
	}
	return off
}
