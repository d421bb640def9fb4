package hookapi

import (
	"bytes"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

// TestRequestJSONAsMarshal: AppendJSON writes json.Marshal's bytes for
// both request types, full and empty.
func TestRequestJSONAsMarshal(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "e2e.example.com/v1", "kind": "Parent",
		"metadata": map[string]any{"name": "p<1>", "namespace": "ns", "labels": map[string]any{"app": "a&b"}},
		"spec":     map[string]any{"replicas": int64(3), "ratio": 0.5, "list": []any{"x", nil, true}}}}
	child := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "ns"}, "data": map[string]any{"k": "v\u2028"}}}
	}
	children := ObjectMap{"ConfigMap.v1": {"b": child("b"), "a": child("a"), "z": nil, "e": {}}, "Secret.v1": {}, "Pod.v1": nil}
	cc := &mcv1a1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "cc", Generation: 2}}
	dc := &mcv1a1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "dc"}}
	for _, req := range []interface {
		AppendJSON([]byte) ([]byte, error)
	}{
		&CompositeRequest{Controller: cc, Parent: parent, Children: children, Related: ObjectMap{}, Finalizing: true},
		&CompositeRequest{},
		&CompositeRequest{Parent: &unstructured.Unstructured{}, Children: ObjectMap{}},
		&DecoratorRequest{Controller: dc, Object: parent, Attachments: children, Related: children},
		&DecoratorRequest{},
	} {
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := req.AppendJSON([]byte("x"))
		if err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("%T:\n got  %s (%v)\n want x%s", req, got, err, want)
		}
	}
}

// BenchmarkRequestJSON encodes a CompositeRequest of a parent with 3
// ConfigMaps as a hook call does (AppendJSON), next to json.Marshal's
// reflection, which writes the same bytes.
func BenchmarkRequestJSON(b *testing.B) {
	obj := func(kind, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "4b1c0d5e", "resourceVersion": "1234",
				"labels": map[string]any{"app": "web", "tier": "front"}, "annotations": map[string]any{"note": "x"}},
			"data": map[string]any{"a": "1", "b": "22", "c": "333", "replicas": int64(3)}}}
	}
	req := &CompositeRequest{Controller: &mcv1a1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: "cc"}},
		Parent:   obj("Parent", "p"),
		Children: ObjectMap{"ConfigMap.v1": {"a": obj("ConfigMap", "a"), "b": obj("ConfigMap", "b"), "c": obj("ConfigMap", "c")}},
		Related:  ObjectMap{}}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 8192)
		for b.Loop() {
			if _, err := req.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
