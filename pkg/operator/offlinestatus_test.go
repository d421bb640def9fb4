package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestInputStatusSubresource(t *testing.T) {
	crd := func(group, kind string, versions ...map[string]any) *unstructured.Unstructured {
		vs := make([]any, len(versions))
		for i, v := range versions {
			vs[i] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "x"},
			"spec":     map[string]any{"group": group, "names": map[string]any{"kind": kind}, "versions": vs},
		}}
	}
	has := InputStatusSubresource([]*unstructured.Unstructured{
		crd("example.io", "WebApp",
			map[string]any{"name": "v1", "subresources": map[string]any{"status": map[string]any{}}},
			map[string]any{"name": "v1beta1"}),
		crd("example.io", "Plain", map[string]any{"name": "v1"}),
	})
	for _, c := range []struct {
		gvk  schema.GroupVersionKind
		want bool
	}{
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, true},
		{schema.GroupVersionKind{Group: "example.io", Version: "v1", Kind: "WebApp"}, true},
		{schema.GroupVersionKind{Group: "example.io", Version: "v1beta1", Kind: "WebApp"}, false},
		{schema.GroupVersionKind{Group: "example.io", Version: "v1", Kind: "Plain"}, false},
		{schema.GroupVersionKind{Group: "other.io", Version: "v1", Kind: "Unknown"}, true},
		{schema.GroupVersionKind{Group: "op.view.dcontroller.io", Version: "v1alpha1", Kind: "Health"}, false},
	} {
		if got := has(c.gvk); got != c.want {
			t.Errorf("%s: has status subresource %v, want %v", c.gvk, got, c.want)
		}
	}
}
