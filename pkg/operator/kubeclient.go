package operator

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// kubeClient adapts a controller-runtime client (reads served from the
// shared informer cache) to controller.Client. Reads return the cache's own
// objects, not copies: controllers never modify them (see
// controller.Client). live, when set, reads from the API server itself
// (GetLive: the cache drops managedFields). Writes send the field manager
// their context carries (controller.WithFieldManager).
type kubeClient struct {
	c    client.Client
	live client.Reader
}

// fieldOwner returns the write options naming the field manager of ctx.
func fieldOwner(ctx context.Context) []client.CreateOption {
	if fm := controller.FieldManagerFrom(ctx); fm != "" {
		return []client.CreateOption{client.FieldOwner(fm)}
	}
	return nil
}

// GetLive reads one object from the API server, managedFields included
// (controller.LiveReader); without an API reader, from the cache.
func (k kubeClient) GetLive(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if k.live == nil {
		return k.Get(ctx, gvk, key)
	}
	u := newObj(gvk)
	if err := k.live.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, u); err != nil {
		return nil, err
	}
	return u, nil
}

func newObj(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func (k kubeClient) Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	u := newObj(gvk)
	if err := k.c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, u, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return u, nil
}

func (k kubeClient) List(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := k.c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (k kubeClient) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	return k.c.Create(ctx, obj, fieldOwner(ctx)...)
}

func (k kubeClient) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	var opts []client.UpdateOption
	if fm := controller.FieldManagerFrom(ctx); fm != "" {
		opts = append(opts, client.FieldOwner(fm))
	}
	return k.c.Update(ctx, obj, opts...)
}

// Patch sends a merge patch. Nothing reads the patched object: the answer
// is asked for as metadata only (PartialObjectMetadata), and not decoded
// when the client can send it so (watchcodec.AnswerlessPatcher); the whole
// object would cost the API server its encoding and the manager its
// decoding on every write.
func (k kubeClient) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	return k.patch(ctx, gvk, key, mergePatch, "")
}

// patch sends a merge patch to the object of key or to its subresource
// ("" for none); see Patch.
func (k kubeClient) patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte, subresource string) error {
	var opts []client.PatchOption
	if fm := controller.FieldManagerFrom(ctx); fm != "" {
		opts = append(opts, client.FieldOwner(fm))
	}
	return watchcodec.PatchAnswerless(ctx, k.c, gvk, key.Namespace, key.Name, types.MergePatchType, mergePatch, subresource, opts...)
}

func (k kubeClient) Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	return k.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership)
}

func (k kubeClient) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	var opts []client.SubResourceUpdateOption
	if fm := controller.FieldManagerFrom(ctx); fm != "" {
		opts = append(opts, client.FieldOwner(fm))
	}
	return k.c.Status().Update(ctx, obj, opts...)
}

// PatchStatus sends a merge patch to the status subresource; the answer
// is not read, as with Patch.
func (k kubeClient) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	return k.patch(ctx, gvk, key, mergePatch, "status")
}

func (k kubeClient) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	return k.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership)
}

func (k kubeClient) Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	u := newObj(gvk)
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	return k.c.Delete(ctx, u)
}

// routerClient sends view kinds to the view store and everything else to
// the cluster.
type routerClient struct {
	views controller.StoreClient
	kube  controller.Client
	// sharded, when set, returns the server-side sharded informer of a
	// kind the controller also watches as a source (namespace-sharded
	// operators): reads of that kind are served from it, so that no
	// informer over every namespace is started for it.
	sharded func(gvk schema.GroupVersionKind) *shardedSource
}

func (r routerClient) pick(gvk schema.GroupVersionKind) controller.Client {
	if opv1a1.IsViewGroup(gvk.Group) || r.kube == nil {
		return r.views
	}
	return r.kube
}

func (r routerClient) Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if s := r.shardedOf(gvk); s != nil {
		return s.get(gvk, key)
	}
	return r.pick(gvk).Get(ctx, gvk, key)
}

func (r routerClient) List(ctx context.Context, gvk schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	if s := r.shardedOf(gvk); s != nil {
		return s.list(), nil
	}
	return r.pick(gvk).List(ctx, gvk)
}

// GetLive reads a native object from the API server (managedFields
// included, see controller.LiveReader); a view as Get does.
func (r routerClient) GetLive(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if lr, ok := r.pick(gvk).(controller.LiveReader); ok {
		return lr.GetLive(ctx, gvk, key)
	}
	return r.Get(ctx, gvk, key)
}

func (r routerClient) shardedOf(gvk schema.GroupVersionKind) *shardedSource {
	if r.sharded == nil {
		return nil
	}
	return r.sharded(gvk)
}

func (r routerClient) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	return r.pick(obj.GroupVersionKind()).Create(ctx, obj)
}

func (r routerClient) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	return r.pick(obj.GroupVersionKind()).Update(ctx, obj)
}

func (r routerClient) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, p []byte) error {
	return r.pick(gvk).Patch(ctx, gvk, key, p)
}

func (r routerClient) Apply(ctx context.Context, obj *unstructured.Unstructured, fm string) error {
	return r.pick(obj.GroupVersionKind()).Apply(ctx, obj, fm)
}

func (r routerClient) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) error {
	return r.pick(obj.GroupVersionKind()).UpdateStatus(ctx, obj)
}

func (r routerClient) PatchStatus(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, p []byte) error {
	return r.pick(gvk).PatchStatus(ctx, gvk, key, p)
}

func (r routerClient) ApplyStatus(ctx context.Context, obj *unstructured.Unstructured, fm string) error {
	return r.pick(obj.GroupVersionKind()).ApplyStatus(ctx, obj, fm)
}

func (r routerClient) Delete(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) error {
	return r.pick(gvk).Delete(ctx, gvk, key)
}

var _ controller.Client = routerClient{}
