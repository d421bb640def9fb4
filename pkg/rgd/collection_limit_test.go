package rgd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// fatCollectionRGD makes one ConfigMap with 40 data fields per item of
// forEach over lists.range(spec.count) (dims dimensions of it), and a
// status field reading the collection.
func fatCollectionRGD(t testing.TB, dims int) *Compiled {
	var data, forEach, name strings.Builder
	for k := range 40 {
		fmt.Fprintf(&data, "        k%d: value-%d-${string(i0)}\n", k, k)
	}
	name.WriteString("${schema.metadata.name")
	for d := range dims {
		fmt.Fprintf(&forEach, "        - i%d: ${lists.range(schema.spec.count)}\n", d)
		fmt.Fprintf(&name, " + '-' + string(i%d)", d)
	}
	name.WriteString("}")
	y := `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: fat}
spec:
  schema:
    apiVersion: v1alpha1
    kind: FatCollection
    spec: {count: "integer | default=3"}
    status:
      items: ${size(cms)}
      first: ${cms[0].metadata.name}
  resources:
    - id: cms
      forEach:
` + forEach.String() + `      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "` + name.String() + `"}
        data:
` + data.String()
	c, err := Compile(decodeRGDTB(t, y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runFat runs the compiled RGD offline on one instance with spec.count
// count and returns the instance and the number of ConfigMaps.
func runFat(t *testing.T, c *Compiled, count int64) (*unstructured.Unstructured, int, error) {
	inst, off, err := runInstance(t, c, "FatCollection", map[string]any{"count": count})
	return inst, len(off.Store.List(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})), err
}

// runInstance runs the compiled RGD offline on one instance default/f of
// the kind with the spec (after the other objects), and returns the
// instance as it ends, the run and the run's error.
func runInstance(t *testing.T, c *Compiled, kind string, spec map[string]any, others ...*unstructured.Unstructured) (*unstructured.Unstructured, *operator.Offline, error) {
	t.Helper()
	ctx := context.Background()
	off, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{
		StatusSubresource: operator.InputStatusSubresource(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: kind}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("default")
	u.SetName("f")
	u.SetUID(types.UID("uid-f"))
	runErr := off.ApplyAll(ctx, append(others, u))
	got, err := off.Store.Get(gvk, object.Key{Namespace: "default", Name: "f"})
	if err != nil {
		t.Fatal(err)
	}
	return got, off, runErr
}

// TestCollectionStatusAtKroMaximum: an instance whose collection has kro's
// maximum of 1,000 items (of 40 data fields each) gets its whole status
// (the status costs work linear in the items, within the evaluation
// budget).
func TestCollectionStatusAtKroMaximum(t *testing.T) {
	c := fatCollectionRGD(t, 1)
	inst, n, err := runFat(t, c, MaxCollectionSize)
	if err != nil {
		t.Fatal(err)
	}
	if n != MaxCollectionSize {
		t.Fatalf("%d ConfigMaps, want %d", n, MaxCollectionSize)
	}
	st, _, _ := unstructured.NestedMap(inst.Object, "status")
	if st["state"] != "ACTIVE" || st["items"] != int64(MaxCollectionSize) || st["first"] != "f-0" {
		t.Fatalf("status %v", st)
	}
}

// TestCollectionOverKroMaximum: a forEach whose Cartesian product has more
// than kro's 1,000 items (12³ = 1,728) creates none of them; the instance
// gets state ERROR and ResourcesReady False with kro's message, its other
// status fields still set.
func TestCollectionOverKroMaximum(t *testing.T) {
	c := fatCollectionRGD(t, 3)
	inst, n, err := runFat(t, c, 12)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d ConfigMaps, want none", n)
	}
	st, _, _ := unstructured.NestedMap(inst.Object, "status")
	if st["state"] != "ERROR" || st["items"] != int64(0) {
		t.Fatalf("status %v", st)
	}
	want := "resource error: spec.resources[0].forEach: collection size of 1728 is over the maximum collection size of 1000"
	// status.first reads cms[0], which fails on no items: GraphResolved
	// (so Ready, the first failing condition) says so, by the field's path.
	wantStatus := "spec.schema.status.first: index out of bounds: 0"
	for _, cd := range st["conditions"].([]any) {
		cd := cd.(map[string]any)
		switch cd["type"] {
		case "ResourcesReady":
			if cd["status"] != "False" || cd["message"] != want || cd["reason"] != "NotReady" {
				t.Errorf("condition %v, want False, NotReady, %q", cd, want)
			}
		case "GraphResolved", "Ready":
			if cd["status"] != "False" || cd["message"] != wantStatus || cd["reason"] != ReasonResolutionFailed {
				t.Errorf("condition %v, want False, %s, %q", cd, ReasonResolutionFailed, wantStatus)
			}
		}
	}
	// Within the limit again (10³): the items are made, the state clears.
	inst, n, err = runFat(t, c, 10)
	if err != nil || n != 1000 || inst.Object["status"].(map[string]any)["state"] != "ACTIVE" {
		t.Fatalf("%d ConfigMaps, %v, status %v", n, err, inst.Object["status"])
	}
}
