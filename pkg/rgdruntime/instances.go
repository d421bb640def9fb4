package rgdruntime

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// InstanceFinalizer is kept on each instance of a running RGD until none of
// its resources remain: kro's instance finalizer name (rgd.InstanceFinalizer,
// the same string as Finalizer), so that instances move between kro and
// this manager as they are.
const InstanceFinalizer = rgd.InstanceFinalizer

// DeletionCheckInterval is how often the resources of an instance being
// deleted are counted again (by a list per kind the RGD writes) until none
// remains and InstanceFinalizer is removed.
const DeletionCheckInterval = time.Second

// instanceGuard keeps InstanceFinalizer on the instances of one running
// RGD: a metadata informer on the instance kind adds it to each instance
// not being deleted and removes it from one being deleted once no object
// of the kinds the RGD writes carries the instance's labels (the compiled
// controller deletes them, dependents first). It writes only the
// finalizers, by a JSON merge patch that names the resourceVersion it read
// (a conflict is retried), so other controllers' finalizers stay.
type instanceGuard struct {
	rgdName    string
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
	// resources are the kinds the RGD writes (its Updater targets).
	resources []schema.GroupVersionKind
	client    client.Client
	reader    client.Reader
	meta      metadata.Interface
	log       logr.Logger

	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	lister cache.GenericLister
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// sameAs reports whether g guards the same kinds as o.
func (g *instanceGuard) sameAs(o *instanceGuard) bool {
	if g.gvr != o.gvr || g.gvk != o.gvk || g.namespaced != o.namespaced || len(g.resources) != len(o.resources) {
		return false
	}
	for i := range g.resources {
		if g.resources[i] != o.resources[i] {
			return false
		}
	}
	return true
}

// instanceKind is the resource and kind of a CRD's instances at its
// storage version (the first version when none is marked, as in a
// compiled CRD not yet applied).
func instanceKind(spec *apiextensionsv1.CustomResourceDefinitionSpec) (schema.GroupVersionResource, schema.GroupVersionKind) {
	version := ""
	for _, v := range spec.Versions {
		if v.Storage || version == "" {
			version = v.Name
		}
	}
	return schema.GroupVersionResource{Group: spec.Group, Version: version, Resource: spec.Names.Plural},
		schema.GroupVersionKind{Group: spec.Group, Version: version, Kind: spec.Names.Kind}
}

// newInstanceGuard returns the guard of a compiled RGD (not started).
func newInstanceGuard(rgdName string, c *Compiled, cl client.Client, reader client.Reader, meta metadata.Interface, log logr.Logger) *instanceGuard {
	crd := c.CRD
	gvr, gvk := instanceKind(&crd.Spec)
	g := &instanceGuard{
		rgdName:    rgdName,
		gvr:        gvr,
		gvk:        gvk,
		namespaced: crd.Spec.Scope != "Cluster",
		client:     cl, reader: reader, meta: meta,
		log: log.WithValues("kind", crd.Spec.Names.Kind),
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, ctl := range c.Operator.Spec.Controllers {
		for _, t := range ctl.Targets {
			if t.Type != opv1a1.Updater {
				continue
			}
			gvk := schema.GroupVersionKind{Kind: t.Kind}
			if t.APIGroup != nil {
				gvk.Group = *t.APIGroup
			}
			if t.Version != nil {
				gvk.Version = *t.Version
			}
			if !seen[gvk] {
				seen[gvk] = true
				g.resources = append(g.resources, gvk)
			}
		}
	}
	return g
}

// start runs the guard until stop.
func (g *instanceGuard) start(ctx context.Context) {
	ctx, g.cancel = context.WithCancel(ctx)
	g.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "rgd-instances-" + g.rgdName})
	inf := metadatainformer.NewFilteredMetadataInformer(g.meta, g.gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
	g.lister = inf.Lister()
	enqueue := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			ns, name, _ := cache.SplitMetaNamespaceKey(k)
			g.queue.Add(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
	})
	g.done.Add(2)
	go func() {
		defer g.done.Done()
		inf.Informer().Run(ctx.Done())
	}()
	go func() {
		defer g.done.Done()
		defer g.queue.ShutDown()
		if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			return
		}
		go func() { <-ctx.Done(); g.queue.ShutDown() }()
		for g.next(ctx) {
		}
	}()
}

// stop stops the guard and waits for it.
func (g *instanceGuard) stop() {
	if g.cancel != nil {
		g.cancel()
		g.done.Wait()
	}
}

func (g *instanceGuard) next(ctx context.Context) bool {
	key, quit := g.queue.Get()
	if quit {
		return false
	}
	defer g.queue.Done(key)
	after, err := g.sync(ctx, key)
	switch {
	case err != nil:
		g.log.Error(err, "instance finalizer", "instance", key.String())
		g.queue.AddRateLimited(key)
	case after > 0:
		g.queue.Forget(key)
		g.queue.AddAfter(key, after)
	default:
		g.queue.Forget(key)
	}
	return true
}

// sync adds or removes InstanceFinalizer on one instance; a positive
// duration asks to look again then (resources remain).
func (g *instanceGuard) sync(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	obj, err := g.get(key)
	if obj == nil || err != nil {
		return 0, err
	}
	has := controllerutil.ContainsFinalizer(obj, InstanceFinalizer)
	if obj.GetDeletionTimestamp().IsZero() {
		if has {
			return 0, nil
		}
		return 0, g.setFinalizers(ctx, obj, append(obj.GetFinalizers(), InstanceFinalizer))
	}
	if !has {
		return 0, nil
	}
	left, err := g.remaining(ctx, obj)
	if err != nil {
		return 0, err
	}
	if left != "" {
		g.log.V(1).Info("instance waits for its resources", "instance", key.String(), "remaining", left)
		return DeletionCheckInterval, nil
	}
	if err := g.setFinalizers(ctx, obj, without(obj.GetFinalizers(), InstanceFinalizer)); err != nil {
		return 0, err
	}
	g.log.Info("instance resources deleted; finalizer removed", "instance", key.String())
	return 0, nil
}

func (g *instanceGuard) get(key types.NamespacedName) (*metav1.PartialObjectMetadata, error) {
	var (
		o   any
		err error
	)
	if g.namespaced {
		o, err = g.lister.ByNamespace(key.Namespace).Get(key.Name)
	} else {
		o, err = g.lister.Get(key.Name)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	obj, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in the %s informer", o, g.gvk.Kind)
	}
	return obj, nil
}

// remaining names one object of the kinds the RGD writes that still
// carries the instance's labels ("" when none does).
func (g *instanceGuard) remaining(ctx context.Context, inst *metav1.PartialObjectMetadata) (string, error) {
	sel := labels.Set{rgd.LabelRGDName: g.rgdName, rgd.LabelInstanceName: inst.Name}
	if g.namespaced {
		sel[rgd.LabelInstanceNS] = inst.Namespace
	}
	for _, gvk := range g.resources {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := g.reader.List(ctx, list, client.MatchingLabels(sel), client.Limit(1)); err != nil {
			return "", fmt.Errorf("listing the %s objects of instance %s/%s: %w", gvk.Kind, inst.Namespace, inst.Name, err)
		}
		if len(list.Items) > 0 {
			o := list.Items[0]
			return fmt.Sprintf("%s %s/%s", gvk.Kind, o.Namespace, o.Name), nil
		}
	}
	return "", nil
}

// setFinalizers writes obj's finalizers as fs: a JSON merge patch of
// metadata.finalizers with obj's resourceVersion, so that it fails with a
// conflict when someone changed them since (retried from the informer's
// newer copy). A vanished instance is no error.
func (g *instanceGuard) setFinalizers(ctx context.Context, obj *metav1.PartialObjectMetadata, fs []string) error {
	err := g.patchFinalizers(ctx, obj, fs)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// patchFinalizers is setFinalizers that also returns a NotFound error.
func (g *instanceGuard) patchFinalizers(ctx context.Context, obj *metav1.PartialObjectMetadata, fs []string) error {
	if fs == nil {
		fs = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": obj.ResourceVersion, "finalizers": fs}})
	if err != nil {
		return err
	}
	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(g.gvk)
	target.Namespace, target.Name = obj.Namespace, obj.Name
	err = g.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
	if err != nil {
		return fmt.Errorf("writing the finalizers of %s %s/%s: %w", g.gvk.Kind, obj.Namespace, obj.Name, err)
	}
	return nil
}

// release removes InstanceFinalizer from every instance that carries it
// (the RGD is gone: nobody would remove it). Errors other than conflicts
// are logged; an instance that still carries it can be released by hand.
func (g *instanceGuard) release(ctx context.Context) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(g.gvk.GroupVersion().WithKind(g.gvk.Kind + "List"))
	if err := g.reader.List(ctx, list); err != nil {
		if !apierrors.IsNotFound(err) {
			g.log.Error(err, "listing the instances to remove their finalizer")
		}
		return
	}
	for i := range list.Items {
		obj := &list.Items[i]
		removed, err := g.releaseOne(ctx, obj)
		if err != nil {
			g.log.Error(err, "removing the finalizer of an instance of a deleted ResourceGraphDefinition", "instance", obj.Namespace+"/"+obj.Name)
			continue
		}
		if removed {
			g.log.Info("finalizer removed: no controller of the ResourceGraphDefinition runs any more", "instance", obj.Namespace+"/"+obj.Name)
		}
	}
}

// releaseOne removes InstanceFinalizer from obj. A conflict (the instance
// changed since it was read: typically the deletion of its
// CustomResourceDefinition setting its deletionTimestamp at the same
// moment) is retried on a fresh read of the instance, with client-go's
// retry.DefaultRetry backoff: given up, the finalizer would stay and hold
// the instance, and with it its CustomResourceDefinition's deletion,
// forever. removed is false when there was nothing to remove (the
// instance has no such finalizer or is gone).
func (g *instanceGuard) releaseOne(ctx context.Context, obj *metav1.PartialObjectMetadata) (removed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		removed = false
		if !controllerutil.ContainsFinalizer(obj, InstanceFinalizer) {
			return nil
		}
		err := g.patchFinalizers(ctx, obj, without(obj.GetFinalizers(), InstanceFinalizer))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			removed = err == nil
			return err
		}
		fresh := &metav1.PartialObjectMetadata{}
		fresh.SetGroupVersionKind(g.gvk)
		if gerr := g.reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); gerr != nil {
			if apierrors.IsNotFound(gerr) {
				return nil
			}
			return gerr
		}
		*obj = *fresh
		return err
	})
	return removed, err
}

func without(xs []string, s string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// newMetadataClient returns the metadata client of the guards, nil without
// a config.
func newMetadataClient(cfg *rest.Config) (metadata.Interface, error) {
	if cfg == nil {
		return nil, nil
	}
	return metadata.NewForConfig(cfg)
}
