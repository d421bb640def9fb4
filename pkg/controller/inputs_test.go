package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// FuzzInputIndex checks inputIndex against a plain map under a sequence of
// puts and deletes over a few keys, with a hash that collides often, and
// documents that name their key, another key or none.
func FuzzInputIndex(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 3, 3, 7, 7, 11, 11, 2, 6, 10, 14})
	f.Add([]byte{0, 4, 8, 12, 1, 5, 9, 13, 16, 20, 24})
	f.Fuzz(func(t *testing.T, ops []byte) {
		orig := hashKey
		defer func() { hashKey = orig }()
		hashKey = func(k object.Key) uint64 { return uint64(len(k.Name) % 2) }
		keys := []object.Key{{Name: "a"}, {Name: "bb"}, {Namespace: "n", Name: "c"}, {Name: "dd"}}
		doc := func(k object.Key, v int) map[string]any {
			return map[string]any{"metadata": map[string]any{"name": k.Name, "namespace": k.Namespace}, "v": int64(v)}
		}
		var x inputIndex
		model := map[object.Key]inputDoc{}
		for i, op := range ops {
			k := keys[int(op>>2)%len(keys)]
			switch op & 3 {
			case 0, 1: // a document naming its key
				d := inputDoc{doc: doc(k, i), hash: uint64(i)}
				x.put(k, d)
				model[k] = d
			case 2: // a document naming another key, or none
				var d inputDoc
				if i%2 == 0 {
					d = inputDoc{doc: doc(keys[(int(op>>2)+1)%len(keys)], i), hash: uint64(i)}
				} else {
					d = inputDoc{doc: map[string]any{"v": int64(i)}, hash: uint64(i)}
				}
				x.put(k, d)
				model[k] = d
			case 3:
				x.del(k)
				delete(model, k)
			}
			for _, k := range keys {
				got, ok := x.get(k)
				want, wok := model[k]
				if ok != wok || got.hash != want.hash {
					t.Fatalf("after op %d: get(%v) = %v, %v; want %v, %v", i, k, got.hash, ok, want.hash, wok)
				}
			}
			if n := len(x.byHash) + len(x.byKey); n != len(model) {
				t.Fatalf("after op %d: %d entries, want %d", i, n, len(model))
			}
		}
	})
}

// FuzzHasGVK checks hasGVK against Unstructured's GroupVersionKind.
func FuzzHasGVK(f *testing.F) {
	for _, s := range [][4]string{
		{"v1", "Pod", "", "v1"}, {"/v1", "Pod", "", "v1"}, {"apps/v1", "Deployment", "apps", "v1"},
		{"apps/v1", "Deployment", "", "v1"}, {"a/b/c", "K", "a", "b/c"}, {"", "K", "", ""}, {"/", "K", "", ""},
		{"x/", "K", "x", ""}, {"/v1", "K", "", ""}, {"v1/", "K", "", "v1"}, {"v1", "Pod", "v1", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, apiVersion, kind, group, version string) {
		if strings.Contains(version, "/") || kind == "" {
			return // not a resolved kind
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
		gvk := schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
		if got, want := hasGVK(u, gvk), u.GroupVersionKind() == gvk; got != want {
			t.Fatalf("hasGVK(%q %q, %v) = %v, want %v", apiVersion, kind, gvk, got, want)
		}
	})
}
