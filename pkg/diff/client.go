package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// objectID names one object of a kind.
type objectID struct {
	gvk schema.GroupVersionKind
	key object.Key
}

// cluster is the read-only view of the live cluster a dry-run client
// writes against: the objects listed before the run and the dynamic
// client the dry-run requests go through.
type cluster struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	// live holds every listed object (of the kinds the controllers read
	// or write) as the API server returned it.
	live map[objectID]*unstructured.Unstructured

	mu      sync.Mutex
	dryRuns int // dry-run requests sent
}

var dryRunAll = []string{metav1.DryRunAll}

// resource returns the dynamic client of gvk in namespace ns.
func (c *cluster) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

func (c *cluster) count() {
	c.mu.Lock()
	c.dryRuns++
	c.mu.Unlock()
}

// liveOf returns the listed object of gvk and key, nil when there was none.
func (c *cluster) liveOf(gvk schema.GroupVersionKind, key object.Key) *unstructured.Unstructured {
	return c.live[objectID{gvk, key}]
}

// dryRunClient is the controller.Client of a diff run. Reads are served
// from the run's store (the listed objects and the run's writes). A write
// of a view goes to the store alone (views live in a manager's memory,
// not in the cluster). A write of a cluster kind is sent to the API server
// as a dry-run request (dryRun=All; nothing is persisted) and the
// server's answer is stored, so the run reads what the server would hold:
//
//   - Create: POST with dryRun.
//   - Update and Patch: PUT with dryRun of the object as the run holds it
//     (a merge patch applied to it first), with the listed object's
//     resourceVersion; a POST when the object was not listed (created
//     earlier in the run). managedFields are left out, so the server
//     keeps them.
//   - Apply: server-side apply with dryRun, the field manager and force,
//     as the manager sends it.
//   - Delete: DELETE with dryRun when the object was listed.
//   - UpdateStatus, PatchStatus, ApplyStatus: the status subresource's
//     request with dryRun when the object was listed; of an object the run
//     created, the status is written in the store only (the server's
//     dry-run create does not keep it either).
//
// The server's errors (validation, admission, RBAC) are returned as the
// manager would get them.
type dryRunClient struct {
	store controller.StoreClient
	c     *cluster
}

var _ controller.Client = dryRunClient{}

func isView(gvk schema.GroupVersionKind) bool { return opv1a1.IsViewGroup(gvk.Group) }

func fieldManager(ctx context.Context) string { return controller.FieldManagerFrom(ctx) }

func (d dryRunClient) Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	return d.store.Get(ctx, gvk, key)
}

func (d dryRunClient) List(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	return d.store.List(ctx, gvk)
}

// body returns a copy of obj fit to send: without managedFields, with
// the listed object's resourceVersion (none when it was not listed).
func (d dryRunClient) body(obj *unstructured.Unstructured) (*unstructured.Unstructured, *unstructured.Unstructured) {
	b := obj.DeepCopy()
	b.SetManagedFields(nil)
	live := d.c.liveOf(obj.GroupVersionKind(), object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	if live != nil {
		b.SetResourceVersion(live.GetResourceVersion())
		b.SetUID(live.GetUID())
	} else {
		b.SetResourceVersion("")
		b.SetUID("")
	}
	return b, live
}

// storeAnswer stores the server's answer ans for an object the run holds
// at resourceVersion rv ("" for a new one): the store's conflict check
// stays the store's own. With keepStatus, the status of the run's object
// is kept (a kind with the status subresource: the main endpoint ignores
// the status, which the run may have changed through the subresource).
// obj is set to the stored object, as a client's answer.
func (d dryRunClient) storeAnswer(obj, ans *unstructured.Unstructured, keepStatus bool) error {
	gvk := obj.GroupVersionKind()
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	ans = ans.DeepCopy()
	ans.SetGroupVersionKind(gvk)
	cur, err := d.store.Store.Get(gvk, key)
	var stored *unstructured.Unstructured
	switch {
	case apierrors.IsNotFound(err):
		ans.SetResourceVersion("")
		stored, err = d.store.Store.Create(ans)
	case err != nil:
		return err
	default:
		if keepStatus {
			if st, ok := cur.Object["status"]; ok {
				ans.Object["status"] = st
			} else {
				delete(ans.Object, "status")
			}
		}
		ans.SetResourceVersion(cur.GetResourceVersion())
		stored, err = d.store.Store.Update(ans)
	}
	if err != nil {
		return err
	}
	obj.Object = stored.Object
	return nil
}

func (d dryRunClient) hasStatus(gvk schema.GroupVersionKind) bool {
	return d.store.StatusSubresource != nil && d.store.StatusSubresource(gvk)
}

func (d dryRunClient) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if isView(obj.GroupVersionKind()) {
		return d.store.Create(ctx, obj)
	}
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, err := d.store.Store.Get(obj.GroupVersionKind(), key); err == nil {
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: obj.GroupVersionKind().Group, Resource: obj.GetKind()}, key.String())
	}
	return d.send(ctx, obj, false)
}

// send writes obj (the whole object as the run would hold it) with a
// dry-run PUT when it was listed, a dry-run POST otherwise, and stores
// the answer.
func (d dryRunClient) send(ctx context.Context, obj *unstructured.Unstructured, keepStatus bool) error {
	ri, err := d.c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	b, live := d.body(obj)
	d.c.count()
	var ans *unstructured.Unstructured
	if live != nil {
		ans, err = d.c.updateFresh(ctx, ri, b, func(b *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			return ri.Update(ctx, b, metav1.UpdateOptions{DryRun: dryRunAll, FieldManager: fieldManager(ctx)})
		})
	} else {
		ans, err = ri.Create(ctx, b, metav1.CreateOptions{DryRun: dryRunAll, FieldManager: fieldManager(ctx)})
	}
	if err != nil {
		return err
	}
	return d.storeAnswer(obj, ans, keepStatus && live != nil)
}

func (d dryRunClient) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	if isView(gvk) {
		return d.store.Update(ctx, obj)
	}
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	cur, err := d.store.Store.Get(gvk, key)
	if err != nil {
		return err
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.String(),
			fmt.Errorf("the object has been modified; resourceVersion %s is not the latest (%s)", rv, cur.GetResourceVersion()))
	}
	return d.send(ctx, obj, d.hasStatus(gvk))
}

// merged returns the run's object of gvk and key with a JSON merge patch
// (RFC 7386) applied.
func (d dryRunClient) merged(gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) (*unstructured.Unstructured, error) {
	cur, err := d.store.Store.Get(gvk, key)
	if err != nil {
		return nil, err
	}
	patch, err := object.FromJSON(mergePatch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	m, err := object.MergePatch(cur.Object, patch)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out := &unstructured.Unstructured{Object: m}
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (d dryRunClient) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if isView(gvk) {
		return d.store.Patch(ctx, gvk, key, mergePatch)
	}
	m, err := d.merged(gvk, key, mergePatch)
	if err != nil {
		return err
	}
	return d.send(ctx, m, d.hasStatus(gvk))
}

func (d dryRunClient) Apply(ctx context.Context, obj *unstructured.Unstructured, fm string) error {
	gvk := obj.GroupVersionKind()
	if isView(gvk) {
		return d.store.Apply(ctx, obj, fm)
	}
	ri, err := d.c.resource(gvk, obj.GetNamespace())
	if err != nil {
		return err
	}
	d.c.count()
	ans, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{DryRun: dryRunAll, FieldManager: fm, Force: true})
	if err != nil {
		return err
	}
	return d.storeAnswer(obj.DeepCopy(), ans, d.hasStatus(gvk))
}

func (d dryRunClient) Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	if isView(gvk) {
		return d.store.Delete(ctx, gvk, key)
	}
	if _, err := d.store.Store.Get(gvk, key); err != nil {
		return err
	}
	if live := d.c.liveOf(gvk, key); live != nil {
		ri, err := d.c.resource(gvk, key.Namespace)
		if err != nil {
			return err
		}
		d.c.count()
		uid := live.GetUID()
		if err := ri.Delete(ctx, key.Name, metav1.DeleteOptions{DryRun: dryRunAll,
			Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			return err
		}
	}
	return d.store.Store.Delete(gvk, key)
}

// storeStatus stores the status of ans on the run's object of obj.
func (d dryRunClient) storeStatus(obj, ans *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	cur, err := d.store.Store.Get(gvk, object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	if err != nil {
		return err
	}
	next := cur.DeepCopy()
	if st, ok := ans.Object["status"]; ok {
		next.Object["status"] = st
	} else {
		delete(next.Object, "status")
	}
	stored, err := d.store.Store.Update(next)
	if err != nil {
		return err
	}
	obj.Object = stored.Object
	return nil
}

func (d dryRunClient) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if isView(gvk) || d.c.liveOf(gvk, key) == nil {
		return d.store.UpdateStatus(ctx, obj)
	}
	cur, err := d.store.Store.Get(gvk, key)
	if err != nil {
		return err
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.String(),
			fmt.Errorf("the object has been modified; resourceVersion %s is not the latest (%s)", rv, cur.GetResourceVersion()))
	}
	return d.sendStatus(ctx, obj)
}

// sendStatus writes obj's status with a dry-run PUT of the status
// subresource of the listed object and stores the answer's status.
func (d dryRunClient) sendStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	ri, err := d.c.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	b, _ := d.body(obj)
	d.c.count()
	ans, err := d.c.updateFresh(ctx, ri, b, func(b *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return ri.UpdateStatus(ctx, b, metav1.UpdateOptions{DryRun: dryRunAll, FieldManager: fieldManager(ctx)})
	})
	if err != nil {
		return err
	}
	return d.storeStatus(obj, ans)
}

func (d dryRunClient) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if isView(gvk) || d.c.liveOf(gvk, key) == nil {
		return d.store.PatchStatus(ctx, gvk, key, mergePatch)
	}
	m, err := d.merged(gvk, key, mergePatch)
	if err != nil {
		return err
	}
	return d.sendStatus(ctx, m)
}

func (d dryRunClient) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fm string) error {
	gvk := obj.GroupVersionKind()
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if isView(gvk) || d.c.liveOf(gvk, key) == nil {
		return d.store.ApplyStatus(ctx, obj, fm)
	}
	ri, err := d.c.resource(gvk, key.Namespace)
	if err != nil {
		return err
	}
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	d.c.count()
	ans, err := ri.Patch(ctx, key.Name, types.ApplyPatchType, b, metav1.PatchOptions{DryRun: dryRunAll, FieldManager: fm, Force: ptrTrue()}, "status")
	if err != nil {
		return err
	}
	return d.storeStatus(obj.DeepCopy(), ans)
}

// conflictRetries bounds updateFresh's attempts.
const conflictRetries = 3

// updateFresh calls update with b; when the API server answers Conflict
// (someone changed the object since it was listed: a Deployment's status,
// say), it reads the object's current resourceVersion and tries again, as
// the manager retries a conflicting write. The count of dry-run requests
// includes each attempt.
func (c *cluster) updateFresh(ctx context.Context, ri dynamic.ResourceInterface, b *unstructured.Unstructured,
	update func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	for attempt := 1; ; attempt++ {
		ans, err := update(b)
		if !apierrors.IsConflict(err) || attempt == conflictRetries {
			return ans, err
		}
		cur, gerr := ri.Get(ctx, b.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return nil, err
		}
		b.SetResourceVersion(cur.GetResourceVersion())
		c.count()
	}
}

func ptrTrue() *bool { t := true; return &t }
