package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// splitKeys turns a fuzz string into a sorted list of distinct keys
// (managedKeys lists are sorted sets).
func splitKeys(s string) []string {
	if s == "" {
		return nil
	}
	keys := strings.Split(s, ",")
	slices.Sort(keys)
	return slices.Compact(keys)
}

// FuzzManagedKeysEncode checks that encode writes exactly what
// json.Marshal writes, for keys with and without characters JSON escapes.
func FuzzManagedKeysEncode(f *testing.F) {
	for _, seed := range [][3]string{
		{"", "", ""},
		{"app,tier", "", "0123456789abcdef"},
		{"", "example.com/note", ""},
		{"a", "b,c", "00ff"},
		{"x<y", "a&b,q\"r", "\\"},
		{"é,\u2028", "\x00\x1f\x7f", "\xff"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, labels, anns, output string) {
		m := managedKeys{Labels: splitKeys(labels), Annotations: splitKeys(anns), Output: output}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.encode(); got != string(want) {
			t.Fatalf("encode(%#v) = %s, json.Marshal: %s", m, got, want)
		}
	})
}

// mergeManagedModel is mergeManaged's definition: existing with out laid
// over it and the keys of prev that out does not set removed.
func mergeManagedModel(existing, out map[string]any, prev []string) (map[string]any, []string) {
	merged := map[string]any{}
	for k, v := range existing {
		merged[k] = v
	}
	for k, v := range out {
		merged[k] = v
	}
	var removed []string
	for _, k := range prev {
		if _, keep := out[k]; keep {
			continue
		}
		if _, ok := merged[k]; ok {
			delete(merged, k)
			removed = append(removed, k)
		}
	}
	if len(merged) == 0 {
		merged = nil
	}
	return merged, removed
}

// stringMap decodes "k=v;k2=v2" (a value "-" is missing: the key alone).
func stringMap(s string) map[string]any {
	if s == "" {
		return nil
	}
	m := map[string]any{}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// FuzzMergeManaged checks mergeManaged, which returns one of its maps
// when the merge equals it, against its definition, and that it modifies
// neither map.
func FuzzMergeManaged(f *testing.F) {
	for _, seed := range [][3]string{
		{"app=a", "app=a", "app"},
		{"app=a;x=1", "app=b", "app"},
		{"app=a;x=1", "app=a", "x"},
		{"", "", "x"},
		{"x=1", "", "x"},
		{"o=1;m=2", "o=1;m=3", "m,m"},
		{"a=1", "b=2", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, existing, out, prev string) {
		e, o := stringMap(existing), stringMap(out)
		var p []string
		if prev != "" {
			p = strings.Split(prev, ",")
		}
		e0, o0 := stringMap(existing), stringMap(out)
		got, gotRemoved := mergeManaged(e, o, p)
		want, wantRemoved := mergeManagedModel(e, o, p)
		if !reflect.DeepEqual(got, want) || len(gotRemoved) != len(wantRemoved) {
			t.Fatalf("mergeManaged(%v, %v, %q) = %v, %q; want %v, %q", e, o, p, got, gotRemoved, want, wantRemoved)
		}
		if !reflect.DeepEqual(e, e0) || !reflect.DeepEqual(o, o0) {
			t.Fatalf("mergeManaged modified its arguments: %v, %v", e, o)
		}
	})
}

// TestWrittenRecord: after every write of an Updater, the record
// writtenRecord rebuilds from what the controller kept of the write is the
// ManagedMetadataAnnotation value on the object, and its keys are that
// value's, as label and annotation sets grow, shrink, change and empty, on
// a native kind (with an output digest) and on a view (without).
func TestWrittenRecord(t *testing.T) {
	steps := []struct{ labels, anns map[string]any }{
		{map[string]any{"a": "1"}, nil},
		{map[string]any{"a": "2"}, nil},
		{map[string]any{"a": "2", "b": "1"}, map[string]any{"n": "x"}},
		{map[string]any{"b": "1"}, map[string]any{"n": "y", "m": "z"}},
		{nil, nil},
		{nil, map[string]any{"n": "x"}},
		{map[string]any{"c": "1"}, map[string]any{"n": "x"}},
	}
	for _, tc := range []struct{ name, target string }{
		{"native", `{apiGroup: "", version: v1, kind: ConfigMap}`},
		{"view", `{kind: RecordView}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := view.NewStore()
			y := strings.Replace(named("rec"), `target: {apiGroup: "", version: v1, kind: ConfigMap}`, "target: "+tc.target, 1)
			c := mustNew(t, y, Options{Operator: "test", Client: StoreClient{Store: store}})
			key := object.Key{Namespace: "ns", Name: "p"}
			var prev *unstructured.Unstructured
			for i, st := range steps {
				pod := metaPod(st.labels, st.anns)
				pod.Object["spec"].(map[string]any)["image"] = fmt.Sprint("img-", i)
				if err := c.Handle(ctx, prev, pod); err != nil {
					t.Fatal(err)
				}
				prev = pod
				obj, err := store.Get(c.Targets()[0].GVK, key)
				if err != nil {
					t.Fatal(err)
				}
				want := obj.GetAnnotations()[ManagedMetadataAnnotation]
				w, ok := c.Targets()[0].getWrittenState(key)
				if !ok {
					t.Fatalf("step %d: nothing kept of the write", i)
				}
				got, keys := c.Targets()[0].writtenRecord(w, "", managedKeys{})
				if got != want {
					t.Fatalf("step %d: writtenRecord = %q, the object has %q (isOutput %v)", i, got, want, w.isOutput)
				}
				m := parseManagedRecord(want)
				if !slices.Equal(keys.Labels, m.Labels) || !slices.Equal(keys.Annotations, m.Annotations) {
					t.Fatalf("step %d: keys %v, record %v", i, keys, m)
				}
				// With the record and keys of the same write, the fast path
				// gives the same.
				cur := managedKeys{Labels: m.Labels, Annotations: m.Annotations, Output: m.Output}
				if got2, _ := c.Targets()[0].writtenRecord(w, want, cur); got2 != want {
					t.Fatalf("step %d: writtenRecord with the current record = %q, want %q", i, got2, want)
				}
			}
		})
	}
}
