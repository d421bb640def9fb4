package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// applierSpec writes a view object per Pod with an Applier target, its
// status from the Pod's.
const applierSpec = `
name: c
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    spec: {image: "$.spec.image"}
    status: {phase: "$.status.phase"}
target: {kind: Copy, type: Applier}
`

var copyGVK = schema.GroupVersionKind{Group: "test.view.dcontroller.io", Version: "v1alpha1", Kind: "Copy"}

// TestApplierReleasesAfterResync: an Applier written without server-side
// apply (a view, an offline run) owns every field it applies, as
// server-side apply with force does, so that after a Resync (which
// forgets what was written and re-applies over an object that already
// holds the output) an output that goes still gives up its fields. It
// owned only the fields a patch changed, none after the Resync, and the
// object kept its spec and status.
func TestApplierReleasesAfterResync(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	c := mustNew(t, applierSpec, Options{Operator: "test", Client: StoreClient{Store: store}})
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}, "status": map[string]any{"phase": "Running"}})
	if err := c.HandleBatch(ctx, []Change{{New: pod}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.HandleBatch(ctx, []Change{{Old: pod}}); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(copyGVK, object.Key{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"spec", "status"} {
		if v, ok := got.Object[f]; ok && !object.Equal(v, map[string]any{}) {
			t.Errorf("%s stays after the output went: %v", f, v)
		}
	}
}

// TestApplierCreateWritesStatusThroughSubresource: an Applier written
// without server-side apply creates a missing object of a kind with the
// status subresource and then writes its status through PatchStatus (the
// API server stores no status on create), here against StoreClient's
// model of the subresource; the status was lost.
func TestApplierCreateWritesStatusThroughSubresource(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	y := `
name: c
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    spec: {image: "$.spec.image"}
    status: {phase: "$.status.phase"}
target: {apiGroup: example.com, version: v1, kind: Copy, type: Applier}
`
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Copy"}
	has := func(g schema.GroupVersionKind) bool { return g == gvk }
	c := mustNew(t, y, Options{Operator: "test", Client: StoreClient{Store: store, StatusSubresource: has},
		HasStatus: func(g schema.GroupVersionKind) (bool, error) { return has(g), nil }})
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}, "status": map[string]any{"phase": "Running"}})
	if err := c.HandleBatch(ctx, []Change{{New: pod}}); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(gvk, object.Key{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"phase": "Running"}; !object.Equal(got.Object["status"], want) {
		t.Errorf("status = %v, want %v", got.Object["status"], want)
	}
}
