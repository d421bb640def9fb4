package operator

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// StatusDiscovery is the part of a discovery client that says which
// subresources a kind's resource has (discovery.DiscoveryInterface has it).
type StatusDiscovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// hasStatus reports whether gvk, a native target kind, has the status
// subresource: whether the API server's resource list of its group
// version has a "<resource>/status" entry (discovery, as kubectl reads
// it: a CustomResourceDefinition version with subresources.status has
// one, and so do the native kinds with a status). A view, or a runtime
// without discovery (standalone: every kind lives in the view store), has
// none. A failed lookup is a discoveryError: the start is retried.
func (r *Runtime) hasStatus(gvk schema.GroupVersionKind) (bool, error) {
	if r.isView(gvk) || r.opts.Discovery == nil || r.opts.RESTMapper == nil {
		return false, nil
	}
	m, err := r.opts.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, &discoveryError{fmt.Errorf("discovering kind %s: %w", gvk, err)}
	}
	list, err := r.opts.Discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return false, &discoveryError{fmt.Errorf("discovering the resources of %s: %w", gvk.GroupVersion(), err)}
	}
	return hasSubresource(list, m.Resource.Resource, "status"), nil
}

// hasSubresource reports whether list names resource/sub.
func hasSubresource(list *metav1.APIResourceList, resource, sub string) bool {
	if list == nil {
		return false
	}
	for _, res := range list.APIResources {
		if name, s, ok := strings.Cut(res.Name, "/"); ok && name == resource && s == sub {
			return true
		}
	}
	return false
}

var _ StatusDiscovery = discovery.DiscoveryInterface(nil)
