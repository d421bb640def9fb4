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
//
// Without StatusSubresource (a view store) a kind has no status
// subresource: the status is written with the object, and UpdateStatus,
// PatchStatus and ApplyStatus write it alone.
type StoreClient struct {
	Store *view.Store
	// StatusSubresource, when set, reports the kinds the client serves as
	// the API server serves a kind with the status subresource (Kubernetes
	// API conventions, "Spec and Status"; a CRD's subresources.status):
	//
	//   - Create stores the object without its status.
	//   - Update and Patch (and Apply, offline a create or a patch) store
	//     what they send with the status the stored object has: the status
	//     sent to the main endpoint is ignored.
	//   - UpdateStatus (with the resourceVersion check of Update),
	//     PatchStatus (the merge patch applied to the object, then its
	//     status taken) and ApplyStatus write the status alone and keep
	//     the rest of the stored object, metadata included; they answer
	//     NotFound for a missing object (the subresource creates nothing).
	//   - Create, Update and UpdateStatus set obj to the stored object,
	//     resourceVersion included, as a client of the API server receives
	//     the answer.
	//
	// It is a small model for tests of the controllers' two-call status
	// writes without an API server (FuzzIncremental); the end-to-end
	// tests cover the API server's own behaviour. The status of a native
	// kind that the API server resets to its empty struct on create is
	// modelled as absent.
	StatusSubresource func(gvk schema.GroupVersionKind) bool
}

// subresource reports whether the client models gvk with the status
// subresource (StatusSubresource).
func (c StoreClient) subresource(gvk schema.GroupVersionKind) bool {
	return c.StatusSubresource != nil && c.StatusSubresource(gvk)
}

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

// keepStatus returns obj with the top-level status of stored (none when
// stored has none), as the main endpoint of a kind with the status
// subresource stores it: a shallow copy; obj is not modified.
func keepStatus(obj *unstructured.Unstructured, stored map[string]any) *unstructured.Unstructured {
	st, ok := stored["status"]
	return &unstructured.Unstructured{Object: withStatus(obj.Object, st, ok)}
}

// writeStatus stores existing with the top-level status of doc (none when
// doc has none) and returns the stored object; rv, when set, must be the
// stored object's resourceVersion (Conflict otherwise).
func (c StoreClient) writeStatus(existing *unstructured.Unstructured, doc map[string]any, rv string) (*unstructured.Unstructured, error) {
	st, ok := doc["status"]
	out := &unstructured.Unstructured{Object: withStatus(existing.Object, st, ok)}
	if rv != "" {
		out.SetResourceVersion(rv)
	}
	return c.Store.Update(out)
}

// UpdateStatus replaces the status of the stored object with obj's and
// sets obj to the stored object. A set resourceVersion must be the current
// one (Conflict otherwise).
func (c StoreClient) UpdateStatus(_ context.Context, obj *unstructured.Unstructured) error {
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	existing, err := c.Store.Get(obj.GroupVersionKind(), key)
	if err != nil {
		return err
	}
	stored, err := c.writeStatus(existing, obj.Object, obj.GetResourceVersion())
	if err != nil {
		return err
	}
	obj.Object = stored.Object
	return nil
}

// merged reads the stored object of gvk and key and applies a JSON merge
// patch (RFC 7386) to a copy: the stored object and the result. A missing
// object is the store's NotFound error.
func (c StoreClient) merged(gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) (*unstructured.Unstructured, map[string]any, error) {
	existing, err := c.Store.Get(gvk, key)
	if err != nil {
		return nil, nil, err
	}
	patch, err := object.FromJSON(mergePatch)
	if err != nil {
		return nil, nil, err
	}
	merged, err := object.MergePatch(existing.Object, patch)
	if err != nil {
		return nil, nil, err
	}
	return existing, merged, nil
}

// PatchStatus applies a merge patch to the stored object and keeps the
// status of the result (the patch's fields outside status have no effect).
func (c StoreClient) PatchStatus(_ context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	existing, merged, err := c.merged(gvk, key, mergePatch)
	if err != nil {
		return err
	}
	_, err = c.writeStatus(existing, merged, "")
	return err
}

// ApplyStatus applies obj's status as a merge patch (see Apply) through
// PatchStatus; NotFound when the object does not exist.
func (c StoreClient) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, _ string) error {
	b, err := json.Marshal(map[string]any{"status": obj.Object["status"]})
	if err != nil {
		return err
	}
	return c.PatchStatus(ctx, obj.GroupVersionKind(), object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, b)
}

// NoServerSideApply marks a client without server-side apply.
func (StoreClient) NoServerSideApply() {}

// Get and List hand out the stored objects themselves, not copies: the
// controller never modifies what a Client reads (see Client).
func (c StoreClient) Get(_ context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	return c.Store.GetShared(gvk, key)
}

func (c StoreClient) List(_ context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	return c.Store.ListShared(gvk), nil
}

func (c StoreClient) Create(_ context.Context, obj *unstructured.Unstructured) error {
	in := asServer(obj)
	sub := c.subresource(obj.GroupVersionKind())
	if sub {
		in = keepStatus(in, nil)
	}
	if err := object.ValidateMetadata(in, in.GetNamespace() != ""); err != nil {
		return err
	}
	stored, err := c.Store.CreateShared(in)
	if err == nil && sub {
		obj.Object = stored.DeepCopy().Object
	}
	return err
}

func (c StoreClient) Update(_ context.Context, obj *unstructured.Unstructured) error {
	in := asServer(obj)
	sub := c.subresource(obj.GroupVersionKind())
	if sub {
		existing, err := c.Store.GetShared(obj.GroupVersionKind(), object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
		if err != nil {
			return err
		}
		in = keepStatus(in, existing.Object)
	}
	if err := object.ValidateMetadata(in, in.GetNamespace() != ""); err != nil {
		return err
	}
	stored, err := c.Store.UpdateShared(in)
	if err == nil && sub {
		obj.Object = stored.DeepCopy().Object
	}
	return err
}

func (c StoreClient) Patch(_ context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	existing, merged, err := c.merged(gvk, key, mergePatch)
	if err != nil {
		return err
	}
	obj := asServer(&unstructured.Unstructured{Object: merged})
	if c.subresource(gvk) {
		obj = keepStatus(obj, existing.Object)
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
		return err
	}
	_, err = c.Store.UpdateShared(obj)
	return err
}

func (c StoreClient) Apply(ctx context.Context, obj *unstructured.Unstructured, _ string) error {
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, err := c.Store.GetShared(obj.GroupVersionKind(), key); err != nil {
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
