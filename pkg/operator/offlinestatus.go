package operator

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// InputStatusSubresource is the status-subresource rule of an offline run
// (dctl eval) over the given input objects, for OfflineOptions.
// StatusSubresource: with no API server to ask, a kind has the subresource
// unless it is a view (views have none) or a CustomResourceDefinition among
// the inputs defines it without spec.versions[].subresources.status for
// that version. Native kinds that carry a status have the subresource
// (Kubernetes API conventions, "Spec and Status"), and a native kind without
// one has no status field that an output could set. So an Updater of
// Deployments leaves the status its inputs give a Deployment, as the API
// server does, instead of replacing it with none.
func InputStatusSubresource(inputs []*unstructured.Unstructured) func(gvk schema.GroupVersionKind) bool {
	// group/kind/version -> whether the CRD gives that version the subresource.
	crd := map[schema.GroupVersionKind]bool{}
	for _, obj := range inputs {
		if obj.GetKind() != "CustomResourceDefinition" || obj.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			vm, ok := v.(map[string]any)
			if !ok {
				continue
			}
			name, _ := vm["name"].(string)
			_, has, _ := unstructured.NestedMap(vm, "subresources", "status")
			crd[schema.GroupVersionKind{Group: group, Version: name, Kind: kind}] = has
		}
	}
	return func(gvk schema.GroupVersionKind) bool {
		if opv1a1.IsViewGroup(gvk.Group) {
			return false
		}
		if has, ok := crd[gvk]; ok {
			return has
		}
		return true
	}
}

// InputCRDVersions maps "<group>/<kind>" of every CustomResourceDefinition
// among inputs to its storage version (the version a kind whose source or
// target omits one resolves to offline, as the served version an API
// server prefers is, for a CRD with one storage version, usually that one).
func InputCRDVersions(inputs []*unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, obj := range inputs {
		if obj.GetKind() != "CustomResourceDefinition" || obj.GroupVersionKind().Group != "apiextensions.k8s.io" {
			continue
		}
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			name, _ := vm["name"].(string)
			if storage, _ := vm["storage"].(bool); storage && name != "" && kind != "" {
				out[group+"/"+kind] = name
			}
		}
	}
	return out
}
