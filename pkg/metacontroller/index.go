package metacontroller

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/dcontroller/dcontroller/pkg/informers"
)

// objectIndex mirrors the objects of one kind as seen by one event handler
// on the shared informer. The objects are the informer's own (read-only);
// the index adds lookups by namespace and by controller owner UID.
type objectIndex struct {
	gvk schema.GroupVersionKind

	mu      sync.RWMutex
	byKey   map[types.NamespacedName]*unstructured.Unstructured
	byNS    map[string]map[types.NamespacedName]struct{}
	byOwner map[types.UID]map[types.NamespacedName]struct{}
	// orphans are the objects without a controller, by namespace.
	orphans map[string]map[types.NamespacedName]struct{}
}

func newObjectIndex(gvk schema.GroupVersionKind) *objectIndex {
	return &objectIndex{gvk: gvk,
		byKey:   map[types.NamespacedName]*unstructured.Unstructured{},
		byNS:    map[string]map[types.NamespacedName]struct{}{},
		byOwner: map[types.UID]map[types.NamespacedName]struct{}{},
		orphans: map[string]map[types.NamespacedName]struct{}{},
	}
}

func keyOf(o metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

func addTo[K comparable](m map[K]map[types.NamespacedName]struct{}, k K, v types.NamespacedName) {
	s := m[k]
	if s == nil {
		s = map[types.NamespacedName]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[types.NamespacedName]struct{}, k K, v types.NamespacedName) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// controllerUID returns the UID of o's controller owner reference, or "".
func controllerUID(o metav1.Object) types.UID {
	if ref := metav1.GetControllerOf(o); ref != nil {
		return ref.UID
	}
	return ""
}

func (x *objectIndex) set(o *unstructured.Unstructured) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := keyOf(o)
	if old := x.byKey[k]; old != nil {
		x.unindexOwner(old, k)
	}
	x.byKey[k] = o
	addTo(x.byNS, o.GetNamespace(), k)
	if uid := controllerUID(o); uid != "" {
		addTo(x.byOwner, uid, k)
	} else {
		addTo(x.orphans, o.GetNamespace(), k)
	}
}

func (x *objectIndex) unindexOwner(o *unstructured.Unstructured, k types.NamespacedName) {
	if uid := controllerUID(o); uid != "" {
		removeFrom(x.byOwner, uid, k)
	} else {
		removeFrom(x.orphans, o.GetNamespace(), k)
	}
}

func (x *objectIndex) remove(o *unstructured.Unstructured) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := keyOf(o)
	if old := x.byKey[k]; old != nil {
		x.unindexOwner(old, k)
		delete(x.byKey, k)
		removeFrom(x.byNS, o.GetNamespace(), k)
	}
}

// len is the number of objects.
func (x *objectIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byKey)
}

// get returns the object with the key, or nil.
func (x *objectIndex) get(k types.NamespacedName) *unstructured.Unstructured {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byKey[k]
}

// list returns the objects of namespace ns ("" with all=true: every object).
func (x *objectIndex) list(ns string, all bool) []*unstructured.Unstructured {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []*unstructured.Unstructured
	if all {
		out = make([]*unstructured.Unstructured, 0, len(x.byKey))
		for _, o := range x.byKey {
			out = append(out, o)
		}
		return out
	}
	for k := range x.byNS[ns] {
		out = append(out, x.byKey[k])
	}
	return out
}

// orphanList returns the objects without a controller in namespace ns, or
// in every namespace when all is true.
func (x *objectIndex) orphanList(ns string, all bool) []*unstructured.Unstructured {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []*unstructured.Unstructured
	for n, keys := range x.orphans {
		if !all && n != ns {
			continue
		}
		for k := range keys {
			out = append(out, x.byKey[k])
		}
	}
	return out
}

// owned returns the objects whose controller owner has the UID.
func (x *objectIndex) owned(uid types.UID) []*unstructured.Unstructured {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]*unstructured.Unstructured, 0, len(x.byOwner[uid]))
	for k := range x.byOwner[uid] {
		out = append(out, x.byKey[k])
	}
	return out
}

// eventFunc receives one change: old is nil for an addition, obj is nil for
// a deletion.
type eventFunc func(old, obj *unstructured.Unstructured)

// watch is one event handler on a shared informer, feeding an objectIndex.
type watch struct {
	index *objectIndex
	inf   cache.Informer
	reg   toolscache.ResourceEventHandlerRegistration
	// release gives the shared informer back (informers.Acquire).
	release func()
}

// startWatch registers an event handler for gvk on the manager's shared
// informer. The index is updated before fn is called. When the informer
// does not sync (within ctx), explain turns the error (prefixed "watching
// <gvk>: ") into the one returned, before the informer is released (what
// the informer recorded is forgotten then: informers.SyncError).
func startWatch(ctx context.Context, c cache.Cache, gvk schema.GroupVersionKind, fn eventFunc, explain func(error) error) (*watch, error) {
	inf, release, err := informers.Acquire(ctx, c, gvk)
	if err != nil {
		err = explain(fmt.Errorf("watching %s: %w", gvk, err))
		release()
		return nil, err
	}
	w := &watch{index: newObjectIndex(gvk), inf: inf, release: release}
	asObj := func(o any) *unstructured.Unstructured {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		u, _ := o.(*unstructured.Unstructured)
		return u
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if u := asObj(o); u != nil {
				w.index.set(u)
				fn(nil, u)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			ou, nu := asObj(oldObj), asObj(newObj)
			if nu == nil {
				return
			}
			w.index.set(nu)
			fn(ou, nu)
		},
		DeleteFunc: func(o any) {
			if u := asObj(o); u != nil {
				w.index.remove(u)
				fn(u, nil)
			}
		},
	})
	if err != nil {
		release()
		return nil, fmt.Errorf("watching %s: %w", gvk, err)
	}
	w.reg = reg
	return w, nil
}

func (w *watch) synced() bool { return w.reg.HasSynced() }

func (w *watch) stop() { _ = w.inf.RemoveEventHandler(w.reg) }
