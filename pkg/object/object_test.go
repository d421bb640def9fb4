package object

import (
	"reflect"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

func TestKeyOf(t *testing.T) {
	for _, tc := range []struct {
		doc     map[string]any
		want    Key
		wantErr bool
	}{
		{map[string]any{"metadata": map[string]any{"name": "a", "namespace": "ns"}}, Key{"ns", "a"}, false},
		{map[string]any{"metadata": map[string]any{"name": "a"}}, Key{"", "a"}, false},
		{map[string]any{"metadata": map[string]any{"name": 3}}, Key{}, true},
		{map[string]any{"metadata": map[string]any{}}, Key{}, true},
		{map[string]any{}, Key{}, true},
	} {
		got, err := KeyOf(tc.doc)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("KeyOf(%v) = %v, %v; want %v, error %v", tc.doc, got, err, tc.want, tc.wantErr)
		}
	}
	if s := (Key{"ns", "a"}).String(); s != "ns/a" {
		t.Errorf("String = %q", s)
	}
}

func TestFromJSONUsesInt64(t *testing.T) {
	m, err := FromJSON([]byte(`{"a": 3, "b": 1.5, "c": [1, {"d": 2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": int64(3), "b": 1.5, "c": []any{int64(1), map[string]any{"d": int64(2)}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %#v", m)
	}
	if _, err := FromJSON([]byte(`[1]`)); err == nil {
		t.Error("a JSON list is not an object")
	}
}

func TestMergePatch(t *testing.T) {
	doc := map[string]any{"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1", "y": "2"}}, "spec": map[string]any{"n": int64(1)}}
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": nil, "z": "3"}}, "spec": map[string]any{"n": int64(2)}}
	got, err := MergePatch(doc, patch)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"name": "a", "labels": map[string]any{"y": "2", "z": "3"}}, "spec": map[string]any{"n": int64(2)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if doc["spec"].(map[string]any)["n"] != int64(1) {
		t.Error("MergePatch modified its input")
	}
}

func TestRemovalPatch(t *testing.T) {
	prev := map[string]any{"metadata": map[string]any{"name": "p", "namespace": "ns", "annotations": map[string]any{"a": "1", "b": "2"}}}
	next := map[string]any{"metadata": map[string]any{"name": "p", "namespace": "ns", "annotations": map[string]any{"a": "3"}}}
	got := RemovalPatch(prev, next)
	want := map[string]any{"metadata": map[string]any{"name": "p", "namespace": "ns", "annotations": map[string]any{"a": "3", "b": nil}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("update: got %v, want %v", got, want)
	}
	got = RemovalPatch(prev, nil)
	want = map[string]any{"metadata": map[string]any{"name": "p", "namespace": "ns", "annotations": map[string]any{"a": nil, "b": nil}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("removal: got %v, want %v", got, want)
	}
	// A scalar in next where prev had a map: next wins.
	got = RemovalPatch(map[string]any{"s": map[string]any{"x": "1"}}, map[string]any{"s": "v"})
	if !reflect.DeepEqual(got, map[string]any{"s": "v"}) {
		t.Errorf("scalar over map: got %v", got)
	}
}

func TestStripServerFields(t *testing.T) {
	doc := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "3", "uid": "u", "generation": int64(2)}}
	got := StripServerFields(doc)
	if !reflect.DeepEqual(got, map[string]any{"metadata": map[string]any{"name": "a"}}) {
		t.Errorf("got %v", got)
	}
	if doc["metadata"].(map[string]any)["uid"] != "u" {
		t.Error("input modified")
	}
}

func TestContains(t *testing.T) {
	existing := map[string]any{
		"metadata": map[string]any{"name": "d", "resourceVersion": "5"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"containers": []any{
			map[string]any{"name": "c", "image": "x", "terminationMessagePath": "/dev/termination-log"},
		}}},
	}
	for _, tc := range []struct {
		sub  any
		want bool
	}{
		{map[string]any{"spec": map[string]any{"replicas": 2.0}}, true},
		{map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{map[string]any{"spec": map[string]any{"template": map[string]any{"containers": []any{map[string]any{"name": "c"}}}}}, true},
		{map[string]any{"spec": map[string]any{"template": map[string]any{"containers": []any{}}}}, false},
		{map[string]any{"spec": map[string]any{"paused": true}}, false},
		{map[string]any{"spec": map[string]any{"paused": nil}}, true},
		{map[string]any{}, true},
	} {
		if got := Contains(existing, tc.sub); got != tc.want {
			t.Errorf("Contains(existing, %v) = %v, want %v", tc.sub, got, tc.want)
		}
	}
}

// TestMergePatchMatchesLibrary checks MergePatch against the json-patch
// library's RFC 7386 implementation on the RFC's examples and random cases.
func TestMergePatchMatchesLibrary(t *testing.T) {
	cases := [][2]string{
		{`{"a":"b"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`},
		{`{"a":["b"]}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`},
		{`{"m":{"x":1,"y":{"z":2}}}`, `{"m":{"y":{"z":null,"w":[1,2]},"x":null}}`},
	}
	for _, c := range cases {
		doc, _ := FromJSON([]byte(c[0]))
		patch, _ := FromJSON([]byte(c[1]))
		got, err := MergePatch(doc, patch)
		if err != nil {
			t.Fatal(err)
		}
		wantB, err := jsonpatch.MergePatch([]byte(c[0]), []byte(c[1]))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := FromJSON(wantB)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("MergePatch(%s, %s) = %v, library gives %v", c[0], c[1], got, want)
		}
		// Inputs untouched.
		if d2, _ := FromJSON([]byte(c[0])); !reflect.DeepEqual(doc, d2) {
			t.Errorf("MergePatch modified its document: %v", doc)
		}
	}
}

// An empty map in a merge patch owns nothing: removing the patch must not
// null the target's own map (RFC 7386 would delete all its keys).
func TestRemovalPatchKeepsEmptyMaps(t *testing.T) {
	prev := map[string]any{"metadata": map[string]any{"name": "t", "labels": map[string]any{}}, "spec": map[string]any{"v": 1}}
	if got := LeafPaths(prev); len(got) != 2 {
		t.Fatalf("LeafPaths = %v, want metadata.name and spec.v only", got)
	}
	rm := RemovalPatch(prev, nil)
	meta := rm["metadata"].(map[string]any)
	if _, ok := meta["labels"]; ok {
		t.Fatalf("removal patch touches labels: %v", rm)
	}
	target := map[string]any{"metadata": map[string]any{"name": "t", "labels": map[string]any{"own": "x"}}, "spec": map[string]any{"v": 1, "w": 2}}
	got, err := MergePatch(target, rm)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"name": "t", "labels": map[string]any{"own": "x"}}, "spec": map[string]any{"w": 2}}
	if !Equal(got, want) {
		t.Fatalf("after removal: %v, want %v", got, want)
	}
}

// FuzzMergePatchChanges checks MergePatchChanges against applying the patch
// and comparing: both documents are read from the fuzzer's bytes as JSON
// (inputs that are not JSON objects are skipped), plus the RFC 7386
// examples and no-op patches as seeds.
func FuzzMergePatchChanges(f *testing.F) {
	seeds := [][2]string{
		{`{"a":"b"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"a":"b"}`},
		{`{"a":"b"}`, `{"a":null}`},
		{`{"b":"b"}`, `{"a":null}`},
		{`{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"c","c":null}}`},
		{`{"a":{"b":"c"}}`, `{"a":{}}`},
		{`{}`, `{"a":{}}`},
		{`{"a":1}`, `{"a":{"b":null}}`},
		{`{"a":null}`, `{"a":null}`},
		{`{"m":{"x":1,"y":{"z":2}}}`, `{"m":{"y":{"z":2},"x":1}}`},
		{`{"metadata":{"name":"p","annotations":{"k":"1"}}}`, `{"metadata":{"name":"p","annotations":{"k":"1"}}}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, docJSON, patchJSON string) {
		doc, err := FromJSON([]byte(docJSON))
		if err != nil || doc == nil {
			return
		}
		patch, err := FromJSON([]byte(patchJSON))
		if err != nil || patch == nil {
			return
		}
		merged, err := MergePatch(doc, patch)
		if err != nil {
			t.Fatal(err)
		}
		want := !Equal(merged, doc)
		if got := MergePatchChanges(doc, patch); got != want {
			t.Fatalf("MergePatchChanges(%s, %s) = %v, applying the patch gives a change: %v (%v)", docJSON, patchJSON, got, want, merged)
		}
	})
}

// TestMergePatchChangesNilMaps: a nil map in the document is not an empty
// map to merge into (MergePatch makes it one, which is a change).
func TestMergePatchChangesNilMaps(t *testing.T) {
	for _, c := range []struct {
		doc, patch map[string]any
	}{
		{map[string]any{"a": map[string]any(nil)}, map[string]any{"a": map[string]any{}}},
		{map[string]any{"a": map[string]any(nil)}, map[string]any{"a": map[string]any{"b": nil}}},
		{map[string]any{"a": map[string]any(nil)}, map[string]any{"a": map[string]any{"b": "c"}}},
		{map[string]any{"a": map[string]any{}}, map[string]any{"a": map[string]any{}}},
	} {
		merged, _ := MergePatch(c.doc, c.patch)
		if got, want := MergePatchChanges(c.doc, c.patch), !Equal(merged, c.doc); got != want {
			t.Errorf("MergePatchChanges(%#v, %#v) = %v, applying it gives a change: %v", c.doc, c.patch, got, want)
		}
	}
}
