package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// keepSpec copies a Pod's image to a ConfigMap of the same name, or, while
// the Pod's spec.hold is true, outputs the keep marker for that name.
const keepSpec = `
name: keep
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    "@cond":
      - "@eq": ["$.spec.hold", true]
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          name: "$.metadata.name"
          namespace: "$.metadata.namespace"
          annotations: {"dcontroller.io/keep": "true"}
      - metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
        data: {image: "$.spec.image"}
target: {apiGroup: "", version: v1, kind: ConfigMap}
`

// TestUpdaterKeepsExisting: an output carrying dcontroller.io/keep leaves
// the existing object as it is (no update when the rest of the source
// changes, no delete, no restore when someone edits or deletes it), creates
// nothing when the object does not exist, and the target writes again
// once the output is an object; the output going deletes the object.
func TestUpdaterKeepsExisting(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	c := mustNew(t, keepSpec, Options{Operator: "test", Client: StoreClient{Store: store}})
	tg := c.Targets()[0]
	key := object.Key{Namespace: "ns", Name: "p"}
	pod := func(image string, hold bool) map[string]any {
		return map[string]any{"spec": map[string]any{"image": image, "hold": hold}}
	}
	image := func() any {
		t.Helper()
		cm, err := store.Get(cmGVK, key)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cm.GetAnnotations()[opv1a1.KeepAnnotation]; ok {
			t.Fatalf("the keep marker was written: %v", cm.GetAnnotations())
		}
		return cm.Object["data"].(map[string]any)["image"]
	}
	p1 := obj(podGVK, "ns", "p", pod("a", false))
	if err := c.Handle(ctx, nil, p1); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != "a" {
		t.Fatalf("image %v, want a", got)
	}
	writes := tg.Counters().Writes
	p2 := obj(podGVK, "ns", "p", pod("b", true))
	if err := c.Handle(ctx, p1, p2); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != "a" {
		t.Fatalf("held: image %v, want a (kept)", got)
	}
	if tg.Counters().Writes != writes {
		t.Fatalf("held: %d writes, want none", tg.Counters().Writes-writes)
	}
	if !tg.Desires(key) || len(tg.WrittenKeys()) != 1 {
		t.Fatalf("held: Desires %v, WrittenKeys %v: the target must keep its record", tg.Desires(key), tg.WrittenKeys())
	}
	// Someone edits the held object: it is not restored, nor on a resync.
	cm, _ := store.Get(cmGVK, key)
	cm = cm.DeepCopy()
	cm.Object["data"] = map[string]any{"image": "edited"}
	if _, err := store.Update(cm); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != "edited" {
		t.Fatalf("held and edited: image %v, want edited", got)
	}
	// Deleted while held: not created again.
	if err := store.Delete(cmGVK, key); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != nil {
		t.Fatalf("held and deleted: image %v, want no object", got)
	}
	// Released: written again.
	p3 := obj(podGVK, "ns", "p", pod("c", false))
	if err := c.Handle(ctx, p2, p3); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != "c" {
		t.Fatalf("released: image %v, want c", got)
	}
	// Held, then the source goes: the output goes, the object is deleted.
	p4 := obj(podGVK, "ns", "p", pod("d", true))
	if err := c.Handle(ctx, p3, p4); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != "c" {
		t.Fatalf("held again: image %v, want c", got)
	}
	if err := c.Handle(ctx, p4, nil); err != nil {
		t.Fatal(err)
	}
	if got := image(); got != nil {
		t.Fatalf("source deleted: image %v, want no object", got)
	}
}
