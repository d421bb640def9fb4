package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestStoreClientStatusSubresource: with StatusSubresource, StoreClient
// serves a kind as the API server serves one with the status subresource
// (Kubernetes API conventions, "Spec and Status"): the main endpoint
// ignores status, the status calls write nothing else; a kind it does not
// name keeps the status written with the object.
func TestStoreClientStatusSubresource(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	plain := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Plain"}
	c := StoreClient{Store: view.NewStore(), StatusSubresource: func(g schema.GroupVersionKind) bool { return g == gvk }}
	key := object.Key{Namespace: "ns", Name: "w"}
	mk := func(gvk schema.GroupVersionKind, spec, status any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec, "status": status}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		return u
	}
	get := func(g schema.GroupVersionKind) *unstructured.Unstructured {
		t.Helper()
		u, err := c.Get(ctx, g, key)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	check := func(step string, u *unstructured.Unstructured, spec, status any) {
		t.Helper()
		if !object.Equal(u.Object["spec"], spec) || !object.Equal(u.Object["status"], status) {
			t.Errorf("%s: spec %v status %v, want %v %v", step, u.Object["spec"], u.Object["status"], spec, status)
		}
	}

	w := mk(gvk, map[string]any{"a": int64(1)}, map[string]any{"s": int64(1)})
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	check("create (the answer)", w, map[string]any{"a": int64(1)}, nil)
	if w.GetResourceVersion() == "" {
		t.Error("create: the answer has no resourceVersion")
	}
	check("create", get(gvk), map[string]any{"a": int64(1)}, nil)

	st := mk(gvk, map[string]any{"a": int64(9)}, map[string]any{"s": int64(2)})
	st.SetLabels(map[string]string{"ignored": "yes"})
	if err := c.UpdateStatus(ctx, st); err != nil {
		t.Fatal(err)
	}
	check("update status", get(gvk), map[string]any{"a": int64(1)}, map[string]any{"s": int64(2)})
	if len(get(gvk).GetLabels()) != 0 {
		t.Error("update status: the labels sent were stored")
	}

	up := mk(gvk, map[string]any{"a": int64(2)}, map[string]any{"s": int64(9)})
	if err := c.Update(ctx, up); err != nil {
		t.Fatal(err)
	}
	check("update (the answer)", up, map[string]any{"a": int64(2)}, map[string]any{"s": int64(2)})
	check("update", get(gvk), map[string]any{"a": int64(2)}, map[string]any{"s": int64(2)})

	if err := c.Patch(ctx, gvk, key, []byte(`{"spec":{"a":3},"status":null}`)); err != nil {
		t.Fatal(err)
	}
	check("patch", get(gvk), map[string]any{"a": int64(3)}, map[string]any{"s": int64(2)})

	if err := c.PatchStatus(ctx, gvk, key, []byte(`{"spec":{"a":9},"status":{"t":1}}`)); err != nil {
		t.Fatal(err)
	}
	check("patch status", get(gvk), map[string]any{"a": int64(3)}, map[string]any{"s": int64(2), "t": int64(1)})

	if err := c.ApplyStatus(ctx, mk(gvk, nil, map[string]any{"s": nil}), "m"); err != nil {
		t.Fatal(err)
	}
	check("apply status", get(gvk), map[string]any{"a": int64(3)}, map[string]any{"t": int64(1)})

	stale := mk(gvk, nil, map[string]any{"s": int64(5)})
	stale.SetResourceVersion(w.GetResourceVersion())
	if err := c.UpdateStatus(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("update status with a stale resourceVersion: %v, want Conflict", err)
	}
	missing := mk(gvk, nil, map[string]any{"s": int64(5)})
	missing.SetName("none")
	if err := c.ApplyStatus(ctx, missing, "m"); !apierrors.IsNotFound(err) {
		t.Errorf("apply status of a missing object: %v, want NotFound", err)
	}

	// A kind without the subresource: the status goes with the object.
	p := mk(plain, map[string]any{"a": int64(1)}, map[string]any{"s": int64(1)})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	check("create, no subresource", get(plain), map[string]any{"a": int64(1)}, map[string]any{"s": int64(1)})
	if err := c.Patch(ctx, plain, key, []byte(`{"status":{"s":2}}`)); err != nil {
		t.Fatal(err)
	}
	check("patch, no subresource", get(plain), map[string]any{"a": int64(1)}, map[string]any{"s": int64(2)})
}
