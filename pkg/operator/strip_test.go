package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStripManagedFields: the cache transform drops metadata.managedFields
// of unstructured and typed objects and keeps the rest of the metadata.
func TestStripManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "y"},
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Apply"}}},
	}}
	if _, err := stripManagedFields(u); err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["metadata"].(map[string]any)["managedFields"]; ok || u.GetName() != "a" || u.GetLabels()["x"] != "y" {
		t.Errorf("unstructured: %v", u.Object["metadata"])
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if _, err := stripManagedFields(p); err != nil {
		t.Fatal(err)
	}
	if p.ManagedFields != nil || p.Name != "p" {
		t.Errorf("typed: %+v", p.ObjectMeta)
	}
}
