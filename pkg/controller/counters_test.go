package controller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestDeltasCountOnlySourceChanges: the deltas counter counts the changes
// that enter or leave a source's input; a change of an object outside the
// source's label selector, batched with one inside it, is not counted.
func TestDeltasCountOnlySourceChanges(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newController(t, updaterSpec)
	in := obj(podGVK, "ns", "in", map[string]any{"spec": map[string]any{"image": "a"}})
	in.SetLabels(map[string]string{"app": "web"})
	out := obj(podGVK, "ns", "out", map[string]any{"spec": map[string]any{"image": "a"}})
	out.SetLabels(map[string]string{"app": "other"})
	if err := c.HandleBatch(ctx, []Change{{New: in}, {New: out}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Counters().Deltas; got != 1 {
		t.Fatalf("deltas = %d after one matching and one non-matching pod, want 1", got)
	}
	// The matching pod leaves the selector: its removal is a delta.
	left := in.DeepCopy()
	left.SetLabels(map[string]string{"app": "other"})
	out2 := out.DeepCopy()
	out2.Object["spec"] = map[string]any{"image": "b"}
	if err := c.HandleBatch(ctx, []Change{{Old: in, New: left}, {Old: out, New: out2}}); err != nil {
		t.Fatal(err)
	}
	if got := c.Counters().Deltas; got != 2 {
		t.Fatalf("deltas = %d after the pod left the selector, want 2", got)
	}
}

// conflictOnceClient changes the target object in the store (another
// writer) right before the controller's first update of it, so that the
// store answers that update with a Conflict.
type conflictOnceClient struct {
	StoreClient
	done bool
}

func (c *conflictOnceClient) Update(ctx context.Context, o *unstructured.Unstructured) error {
	if !c.done {
		c.done = true
		cur, err := c.Store.Get(o.GroupVersionKind(), object.Key{Namespace: o.GetNamespace(), Name: o.GetName()})
		if err != nil {
			return err
		}
		cur.SetLabels(map[string]string{"touched": "by-another-writer"})
		if _, err := c.Store.Update(cur); err != nil {
			return err
		}
	}
	return c.StoreClient.Update(ctx, o)
}

// TestRetriedConflictIsNoWriteError: a write that meets a Conflict and
// succeeds on its retry is one write and no write error, and records no
// error.
func TestRetriedConflictIsNoWriteError(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &conflictOnceClient{StoreClient: StoreClient{Store: store}}
	client.done = true // the create goes through
	c := mustNew(t, updaterSpec, Options{Operator: "test", Client: client})
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})
	pod.SetLabels(map[string]string{"app": "web"})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	client.done = false
	pod2 := pod.DeepCopy()
	pod2.Object["spec"] = map[string]any{"image": "b"}
	if err := c.Handle(ctx, pod, pod2); err != nil {
		t.Fatal(err)
	}
	if !client.done {
		t.Fatal("the update was not attempted")
	}
	cm, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Object["data"].(map[string]any)["image"] != "b" {
		t.Fatalf("the retried update did not land: %v", cm.Object)
	}
	got := c.Counters()
	if got.WriteErrors != 0 || got.Writes != 2 {
		t.Fatalf("counters %+v, want 2 writes and no write error", got)
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Fatalf("recorded errors %v", errs)
	}
}
