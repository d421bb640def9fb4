package controller

import (
	"context"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// Client is what a controller reads and writes targets through. The
// controller never modifies the objects Get and List return, so they may
// be an informer cache's own objects. Errors are
// Kubernetes API errors (k8s.io/apimachinery/pkg/api/errors), so callers can
// test them with apierrors.IsNotFound and friends.
type Client interface {
	// Get returns the current state of one object.
	Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error)
	// List returns every object of a kind.
	List(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error)
	// Create creates obj; AlreadyExists if it exists.
	Create(ctx context.Context, obj *unstructured.Unstructured) error
	// Update replaces obj; a set resourceVersion must be the current one (Conflict otherwise).
	Update(ctx context.Context, obj *unstructured.Unstructured) error
	// Patch applies a JSON merge patch (RFC 7386); NotFound if the object does not exist.
	Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error
	// Apply writes obj with server-side apply as fieldManager, forcing ownership.
	Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error
	// Delete deletes one object; NotFound if it does not exist.
	Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error

	// The status subresource (PUT, PATCH and apply of <resource>/status):
	// the API server writes only the status of what it is sent there, and
	// ignores the status sent to the main endpoint. A controller calls
	// these only for a target kind that has the subresource
	// (Options.HasStatus).

	// UpdateStatus replaces the status of obj (PUT .../status); a set
	// resourceVersion must be the current one (Conflict otherwise). obj is
	// set to the server's answer.
	UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error
	// PatchStatus applies a JSON merge patch (RFC 7386) to the status
	// subresource; the patch's fields outside status are ignored by the
	// server. NotFound if the object does not exist.
	PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error
	// ApplyStatus writes obj's status with server-side apply through the
	// status subresource as fieldManager, forcing ownership.
	ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error
}

// StoreClient adapts a view.Store to Client. Written objects are checked
// with object.ValidateMetadata, as the API server checks them (Invalid).
// Apply has no schema to merge lists by key offline, so it applies obj as a
// JSON merge patch, creating the object when it is missing; controllers
// writing through a StoreClient handle Applier targets as patches (see
// NoServerSideApply). A core Secret's stringData is folded into data on
// every write, as the API server does (object.FoldSecretStringData).
type StoreClient struct{ Store *view.Store }

// asServer returns obj as the API server would store it: a core Secret with
// its stringData folded into data (a copy; obj is not modified).
func asServer(obj *unstructured.Unstructured) *unstructured.Unstructured {
	if _, ok := obj.Object["stringData"]; !ok {
		return obj
	}
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	object.FoldSecretStringData(out.Object)
	return out
}

// UpdateStatus replaces the status of the stored object with obj's. A view
// store has no status subresource: a controller writes a view's status
// with the object, and calls this only when told a kind has one.
func (c StoreClient) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	existing, err := c.Store.Get(obj.GroupVersionKind(), key)
	if err != nil {
		return err
	}
	out := &unstructured.Unstructured{Object: maps.Clone(existing.Object)}
	if st, ok := obj.Object["status"]; ok {
		out.Object["status"] = st
	} else {
		delete(out.Object, "status")
	}
	if rv := obj.GetResourceVersion(); rv != "" {
		out.SetResourceVersion(rv)
	}
	if err := c.Update(ctx, out); err != nil {
		return err
	}
	obj.Object = out.Object
	return nil
}

// PatchStatus applies the status part of a merge patch (see UpdateStatus).
func (c StoreClient) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	patch, err := object.FromJSON(mergePatch)
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"status": patch["status"]})
	if err != nil {
		return err
	}
	return c.Patch(ctx, gvk, key, b)
}

// ApplyStatus applies obj's status as Apply does (see UpdateStatus).
func (c StoreClient) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	out := &unstructured.Unstructured{Object: map[string]any{"status": obj.Object["status"]}}
	out.SetGroupVersionKind(obj.GroupVersionKind())
	out.SetNamespace(obj.GetNamespace())
	out.SetName(obj.GetName())
	return c.Apply(ctx, out, fieldManager)
}

// NoServerSideApply marks a client without server-side apply.
func (StoreClient) NoServerSideApply() {}

func (c StoreClient) Get(_ context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	return c.Store.Get(gvk, key)
}

func (c StoreClient) List(_ context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	return c.Store.List(gvk), nil
}

func (c StoreClient) Create(_ context.Context, obj *unstructured.Unstructured) error {
	obj = asServer(obj)
	if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
		return err
	}
	_, err := c.Store.Create(obj)
	return err
}

func (c StoreClient) Update(_ context.Context, obj *unstructured.Unstructured) error {
	obj = asServer(obj)
	if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
		return err
	}
	_, err := c.Store.Update(obj)
	return err
}

func (c StoreClient) Patch(_ context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	existing, err := c.Store.Get(gvk, key)
	if err != nil {
		return err
	}
	patch, err := object.FromJSON(mergePatch)
	if err != nil {
		return err
	}
	merged, err := object.MergePatch(existing.Object, patch)
	if err != nil {
		return err
	}
	obj := asServer(&unstructured.Unstructured{Object: merged})
	obj.SetResourceVersion(existing.GetResourceVersion())
	if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
		return err
	}
	_, err = c.Store.Update(obj)
	return err
}

func (c StoreClient) Apply(ctx context.Context, obj *unstructured.Unstructured, _ string) error {
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, err := c.Store.Get(obj.GroupVersionKind(), key); err != nil {
		return c.Create(ctx, obj)
	}
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj.GroupVersionKind(), key, b)
}

func (c StoreClient) Delete(_ context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	return c.Store.Delete(gvk, key)
}
