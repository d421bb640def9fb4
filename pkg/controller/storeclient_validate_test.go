package controller

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestStoreClientValidatesMetadata: writes into the in-memory store are
// checked as the API server checks them (object.ValidateMetadata), on
// create, update and patch alike.
func TestStoreClientValidatesMetadata(t *testing.T) {
	ctx := context.Background()
	c := StoreClient{Store: view.NewStore()}
	obj := func(name string, labels map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "op.view.dcontroller.io/v1alpha1", "kind": "Summary",
			"metadata": map[string]any{"name": name, "namespace": "default"}}}
		if labels != nil {
			u.Object["metadata"].(map[string]any)["labels"] = labels
		}
		return u
	}
	if err := c.Create(ctx, obj("a/b", nil)); !apierrors.IsInvalid(err) {
		t.Errorf("create with a bad name: %v", err)
	}
	if err := c.Create(ctx, obj("a", map[string]any{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, obj("a", map[string]any{"k": "not a label value"})); !apierrors.IsInvalid(err) {
		t.Errorf("update with a bad label: %v", err)
	}
	key := object.Key{Namespace: "default", Name: "a"}
	gvk := obj("a", nil).GroupVersionKind()
	if err := c.Patch(ctx, gvk, key, []byte(`{"metadata":{"labels":{"k":"x y"}}}`)); !apierrors.IsInvalid(err) {
		t.Errorf("patch with a bad label: %v", err)
	}
	got, err := c.Get(ctx, gvk, key)
	if err != nil || got.GetLabels()["k"] != "v" {
		t.Errorf("stored object changed: %v %v", got, err)
	}
}
