package apiserver

import (
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// ResourceName returns the resource (URL path segment) a kind is served as:
// the lowercase plural of the kind, as object.ResourceName, so a view is
// named as a CRD of that kind would be.
func ResourceName(kind string) string {
	return object.ResourceName(kind)
}

// shortNames are the kubectl short names of common built-in kinds, served in
// standalone mode so that `kubectl get po` works as on a cluster.
var shortNames = map[schema.GroupKind][]string{
	{Kind: "Pod"}: {"po"}, {Kind: "Service"}: {"svc"}, {Kind: "ConfigMap"}: {"cm"},
	{Kind: "Namespace"}: {"ns"}, {Kind: "Node"}: {"no"}, {Kind: "Endpoints"}: {"ep"},
	{Kind: "ServiceAccount"}: {"sa"}, {Kind: "PersistentVolumeClaim"}: {"pvc"},
	{Kind: "PersistentVolume"}: {"pv"}, {Kind: "Event"}: {"ev"},
	{Group: "apps", Kind: "Deployment"}: {"deploy"}, {Group: "apps", Kind: "ReplicaSet"}: {"rs"},
	{Group: "apps", Kind: "StatefulSet"}: {"sts"}, {Group: "apps", Kind: "DaemonSet"}: {"ds"},
	{Group: "batch", Kind: "CronJob"}: {"cj"}, {Group: "networking.k8s.io", Kind: "Ingress"}: {"ing"},
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}: {"netpol"},
}

// resource is one served kind.
type resource struct {
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	singular   string
	namespaced bool
	view       bool
	// typed kinds are known to client-go: strategic merge patch works on
	// them, with the merge keys of their Go types.
	typed      bool
	shortNames []string
	// ext holds the OpenAPI extensions of the resource's operations, by
	// action, built once and shared by the v2 and v3 documents.
	extOnce sync.Once
	ext     map[string]spec.Extensions
}

func newResource(gvk schema.GroupVersionKind) *resource {
	r := &resource{
		gvk:        gvk,
		gvr:        gvk.GroupVersion().WithResource(ResourceName(gvk.Kind)),
		singular:   strings.ToLower(gvk.Kind),
		namespaced: !object.ClusterScoped(gvk.GroupKind()),
		view:       opv1a1.IsViewGroup(gvk.Group),
	}
	if !r.view {
		r.typed = clientgoscheme.Scheme.Recognizes(gvk)
		r.shortNames = shortNames[gvk.GroupKind()]
	}
	return r
}

// verbs are the verbs every served resource supports.
var verbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// resourceSet is an immutable snapshot of the served resources.
type resourceSet struct {
	byGVR map[schema.GroupVersionResource]*resource
	byGVK map[schema.GroupVersionKind]*resource
	// groups maps a group to its versions, sorted.
	groups map[string][]string
}

func newResourceSet(kinds []schema.GroupVersionKind) (*resourceSet, []string) {
	set := &resourceSet{
		byGVR:  map[schema.GroupVersionResource]*resource{},
		byGVK:  map[schema.GroupVersionKind]*resource{},
		groups: map[string][]string{},
	}
	var conflicts []string
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	for _, gvk := range kinds {
		if gvk.Version == "" || set.byGVK[gvk] != nil || len(object.ValidateKind(gvk.Kind, field.NewPath("kind"))) > 0 {
			continue
		}
		r := newResource(gvk)
		if other := set.byGVR[r.gvr]; other != nil {
			conflicts = append(conflicts, gvk.String()+" and "+other.gvk.String()+" share resource "+r.gvr.String())
			continue
		}
		set.byGVR[r.gvr] = r
		set.byGVK[gvk] = r
		if !contains(set.groups[gvk.Group], gvk.Version) {
			set.groups[gvk.Group] = append(set.groups[gvk.Group], gvk.Version)
			sort.Strings(set.groups[gvk.Group])
		}
	}
	return set, conflicts
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// inGroupVersion returns the resources of one group/version sorted by name.
func (s *resourceSet) inGroupVersion(gv schema.GroupVersion) []*resource {
	var out []*resource
	for gvr, r := range s.byGVR {
		if gvr.GroupVersion() == gv {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.Resource < out[j].gvr.Resource })
	return out
}

// sameKinds reports whether two sets serve the same kinds.
func (s *resourceSet) sameKinds(o *resourceSet) bool {
	if s == nil || o == nil || len(s.byGVK) != len(o.byGVK) {
		return false
	}
	for gvk := range s.byGVK {
		if o.byGVK[gvk] == nil {
			return false
		}
	}
	return true
}
