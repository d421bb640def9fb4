package object

import (
	"reflect"
	"testing"
)

func TestFoldSecretStringData(t *testing.T) {
	shared := map[string]any{"a": "YQ==", "b": "Yg=="}
	for _, tc := range []struct {
		name     string
		doc, out map[string]any
	}{
		{"merged into data, overriding",
			map[string]any{"apiVersion": "v1", "kind": "Secret", "data": shared, "stringData": map[string]any{"b": "bee", "c": "see"}},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"a": "YQ==", "b": "YmVl", "c": "c2Vl"}}},
		{"no data yet",
			map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{"user": "admin"}},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"user": "YWRtaW4="}}},
		{"empty stringData removed",
			map[string]any{"apiVersion": "v1", "kind": "Secret", "stringData": map[string]any{}},
			map[string]any{"apiVersion": "v1", "kind": "Secret"}},
		{"a view of kind Secret is left alone",
			map[string]any{"apiVersion": "op.view.dcontroller.io/v1alpha1", "kind": "Secret", "stringData": map[string]any{"a": "x"}},
			map[string]any{"apiVersion": "op.view.dcontroller.io/v1alpha1", "kind": "Secret", "stringData": map[string]any{"a": "x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			FoldSecretStringData(tc.doc)
			if !reflect.DeepEqual(tc.doc, tc.out) {
				t.Errorf("got %v, want %v", tc.doc, tc.out)
			}
		})
	}
	if !reflect.DeepEqual(shared, map[string]any{"a": "YQ==", "b": "Yg=="}) {
		t.Errorf("the shared data map was modified: %v", shared)
	}
}
