package apiserver

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// equivalentRegistry is the server's runtime.EquivalentResourceRegistry:
// the kind of each served resource, and the versions of a group/resource
// that are the same objects (every version of a group/resource, as
// runtime.NewEquivalentResourceRegistry has it). Unlike that one, it
// forgets a resource that is no longer served (forget), so kinds that come
// and go (operators created and deleted) leave nothing behind, and
// registering a resource again does not add it twice.
type equivalentRegistry struct {
	mu sync.RWMutex
	// kinds maps resource -> subresource -> kind.
	kinds map[schema.GroupVersionResource]map[string]schema.GroupVersionKind
	// resources maps group/resource -> subresource -> its registered
	// versions.
	resources map[schema.GroupResource]map[string][]schema.GroupVersionResource
}

var _ runtime.EquivalentResourceRegistry = (*equivalentRegistry)(nil)

func newEquivalentRegistry() *equivalentRegistry {
	return &equivalentRegistry{
		kinds:     map[schema.GroupVersionResource]map[string]schema.GroupVersionKind{},
		resources: map[schema.GroupResource]map[string][]schema.GroupVersionResource{},
	}
}

// EquivalentResourcesFor returns the registered versions of resource's
// group/resource with subresource (the caller must not modify the slice).
func (r *equivalentRegistry) EquivalentResourcesFor(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.resources[resource.GroupResource()][subresource]
}

// KindFor returns the kind registered for resource and subresource, the
// zero kind when none is.
func (r *equivalentRegistry) KindFor(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kinds[resource][subresource]
}

// RegisterKindFor records kind as the kind of resource and subresource.
func (r *equivalentRegistry) RegisterKindFor(resource schema.GroupVersionResource, subresource string, kind schema.GroupVersionKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds[resource] == nil {
		r.kinds[resource] = map[string]schema.GroupVersionKind{}
	}
	r.kinds[resource][subresource] = kind
	gr := resource.GroupResource()
	if r.resources[gr] == nil {
		r.resources[gr] = map[string][]schema.GroupVersionResource{}
	}
	if !slices.Contains(r.resources[gr][subresource], resource) {
		// A new slice: callers may hold the old one.
		r.resources[gr][subresource] = append(slices.Clip(r.resources[gr][subresource]), resource)
	}
}

// forget removes resource, with its subresources.
func (r *equivalentRegistry) forget(resource schema.GroupVersionResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gr := resource.GroupResource()
	for sub := range r.kinds[resource] {
		rest := slices.DeleteFunc(slices.Clone(r.resources[gr][sub]), func(x schema.GroupVersionResource) bool { return x == resource })
		if len(rest) == 0 {
			delete(r.resources[gr], sub)
		} else {
			r.resources[gr][sub] = rest
		}
	}
	if len(r.resources[gr]) == 0 {
		delete(r.resources, gr)
	}
	delete(r.kinds, resource)
}

// size returns the number of resources registered.
func (r *equivalentRegistry) size() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.kinds)
}
