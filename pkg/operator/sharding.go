package operator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// checkNamespaceLocal checks that controller i of a namespace-sharded
// operator can run split by namespace: its sources and target are
// namespaced kinds (views are), and its pipeline never combines objects
// of two namespaces (pipeline.NamespaceLocal). The error names the spec
// path.
func (r *Runtime) checkNamespaceLocal(c *controller.Controller, i int) error {
	for j, s := range c.Sources() {
		if err := r.namespaced(s.GVK); err != nil {
			return fmt.Errorf("spec.controllers[%d].sources[%d]: %w", i, j, err)
		}
	}
	for _, t := range c.Targets() {
		if err := r.namespaced(t.GVK); err != nil {
			return fmt.Errorf("%s: %w", t.Path, err)
		}
	}
	if err := c.NamespaceLocal(); err != nil {
		return fmt.Errorf("spec.sharding is Namespace, but %w", err)
	}
	return nil
}

// namespaced fails for a cluster-scoped kind: its objects belong to no
// namespace, so no member could run them alone.
func (r *Runtime) namespaced(gvk schema.GroupVersionKind) error {
	if r.isView(gvk) || r.opts.RESTMapper == nil {
		return nil
	}
	m, err := r.opts.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return &discoveryError{err: err}
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return clusterScopedError(gvk)
	}
	return nil
}

// clusterScopedError is the refusal of a cluster-scoped kind in a
// namespace-sharded operator.
func clusterScopedError(gvk schema.GroupVersionKind) error {
	return fmt.Errorf("%s is cluster-scoped: an operator with spec.sharding Namespace takes only namespaced sources and targets", gvk.Kind)
}

// shardedSource is the informer of one source of a namespace-sharded
// operator when the API server filters list and watch by namespace hash
// (KEP-5866 shardSelector, feature gate ShardedListAndWatch): the member
// then receives only the events of the namespaces it holds. It lives as
// long as the operator (it is restarted with the operator at each
// handover, with the new bucket set).
type shardedSource struct {
	// inf is nil when the member holds no bucket: the source is empty.
	inf toolscache.SharedIndexInformer
}

// events is what the controller registers its handlers with.
func (s *shardedSource) events() eventSource {
	if s.inf == nil {
		return noEvents{}
	}
	return s.inf
}

// list returns the informer's objects (not copies).
func (s *shardedSource) list() []*unstructured.Unstructured {
	if s.inf == nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, o := range s.inf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

// noEvents is the event source of a member without namespaces: nothing
// ever happens.
type noEvents struct{}

func (noEvents) AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return noRegistration{}, nil
}
func (noEvents) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error { return nil }

type noRegistration struct{}

func (noRegistration) HasSynced() bool                          { return true }
func (noRegistration) HasSyncedChecker() toolscache.DoneChecker { return synced{} }

// synced is a DoneChecker that is done from the start.
type synced struct{}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (synced) Name() string          { return "no namespaces held" }
func (synced) Done() <-chan struct{} { return closedCh }

// serverSharding reports whether the API server applies a shardSelector to
// lists of gvr: a list with a selector over the whole hash space answers
// with metadata.shardInfo echoing it only then (an API server without the
// feature ignores the parameter). The answer is kept per resource.
func (r *Runtime) serverSharding(ctx context.Context, gvr schema.GroupVersionResource) bool {
	r.shardProbeMu.Lock()
	defer r.shardProbeMu.Unlock()
	if v, ok := r.shardProbe[gvr]; ok {
		return v
	}
	if r.shardProbe == nil {
		r.shardProbe = map[schema.GroupVersionResource]bool{}
	}
	sel := sharding.Selector(sharding.BucketSet(^uint64(0)), "object.metadata.namespace")
	l, err := r.opts.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1, ShardSelector: sel})
	if err != nil {
		r.opts.Logger.V(1).Info("probing server-side sharded lists failed; filtering on the client", "resource", gvr.String(), "error", err.Error())
		return false
	}
	info, found, _ := unstructured.NestedString(l.Object, "metadata", "shardInfo", "selector")
	ok := found && info != ""
	r.shardProbe[gvr] = ok
	r.opts.Logger.Info("sharded list and watch", "resource", gvr.String(), "serverSide", ok)
	return ok
}

// startShardedSource starts an informer of gvk (in namespace, "" for all)
// that the API server restricts to the namespaces of the buckets this
// member holds, or returns nil when it cannot (no dynamic client, or the
// server does not filter: serverSharding); the caller then watches through
// the shared cache and filters on the client. A member that holds no
// bucket gets an empty source (an empty selector would select
// everything): the operator restarts when buckets come.
func (r *Runtime) startShardedSource(ctx context.Context, gvk schema.GroupVersionKind, namespace string) (*shardedSource, error) {
	if r.opts.Dynamic == nil || r.opts.RESTMapper == nil || r.opts.Ring == nil {
		return nil, nil
	}
	held := r.opts.Ring.Held()
	if held == 0 {
		return &shardedSource{}, nil
	}
	m, err := r.opts.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, &discoveryError{err: err}
	}
	if !r.serverSharding(ctx, m.Resource) {
		return nil, nil
	}
	sel := sharding.Selector(held, "object.metadata.namespace")
	inf := dynamicinformer.NewFilteredDynamicInformer(r.opts.Dynamic, m.Resource, namespace, 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) { o.ShardSelector = sel }).Informer()
	transform := toolscache.TransformFunc(stripManagedFields)
	if r.received != nil {
		transform = r.received.transform
	}
	if err := inf.SetTransform(transform); err != nil {
		return nil, err
	}
	go inf.RunWithContext(ctx)
	sctx, cancel := context.WithTimeout(ctx, InformerSyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the sharded watch of %s did not sync within %s", gvk.Kind, InformerSyncTimeout)
	}
	return &shardedSource{inf: inf}, nil
}

// get returns the informer's object of key (not a copy), or a NotFound
// error.
func (s *shardedSource) get(gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	if s.inf == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	o, ok, err := s.inf.GetStore().GetByKey(k)
	if err != nil {
		return nil, err
	}
	u, isU := o.(*unstructured.Unstructured)
	if !ok || !isU {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	return u, nil
}
