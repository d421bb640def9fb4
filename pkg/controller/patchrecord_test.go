package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// patchCopySpec patches the labels, annotations and data a Pod lists in its
// spec onto the ConfigMap of the same name.
const patchCopySpec = `
name: %s
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: "$.metadata.name"
      namespace: "$.metadata.namespace"
      labels: {"@definedOr": ["$.spec.labels", {}]}
      annotations: {"@definedOr": ["$.spec.annotations", {}]}
    data: {"@definedOr": ["$.spec.data", {}]}
target: {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
`

func patchCopy(name string) string { return strings.Replace(patchCopySpec, "%s", name, 1) }

// patchPod is a source Pod of patchCopySpec.
func patchPod(labels, annotations, data map[string]any) *unstructured.Unstructured {
	return obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"labels": labels, "annotations": annotations, "data": data}})
}

// patchTargetCM creates the ConfigMap ns/p a patchCopySpec Patcher patches,
// with a label, an annotation and a data key of its own.
func patchTargetCM(t *testing.T, store *view.Store) {
	t.Helper()
	cm := obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"own": "o"}})
	cm.SetLabels(map[string]string{"own": "l"})
	cm.SetAnnotations(map[string]string{"own": "a"})
	if _, err := store.Create(cm); err != nil {
		t.Fatal(err)
	}
}

// cmState returns the labels, annotations (without the record of the
// controller named rec) and data of ConfigMap ns/p, and that record.
func cmState(t *testing.T, store *view.Store, rec string) (map[string]string, map[string]string, map[string]any, string) {
	t.Helper()
	cm, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	a := cm.GetAnnotations()
	r := a[PatchRecordAnnotation("test", rec)]
	delete(a, PatchRecordAnnotation("test", rec))
	data, _ := cm.Object["data"].(map[string]any)
	return cm.GetLabels(), a, data, r
}

// TestPatcherRemovesDroppedFieldsAfterResync: a Resync (each Periodic tick)
// keeps the record of the fields a Patcher set, so a field the output drops
// afterwards is removed; fields others set stay.
func TestPatcherRemovesDroppedFieldsAfterResync(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	patchTargetCM(t, store)
	c := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: StoreClient{Store: store}})
	pod := patchPod(map[string]any{"tier": "gold"}, map[string]any{"note": "x", "example.com/team": "a"}, map[string]any{"k": "v", "gone": "soon"})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	_, _, _, rec := cmState(t, store, "copy")
	if want := `["/data/gone","/data/k","/metadata/annotations/example.com~1team","/metadata/annotations/note","/metadata/labels/tier"]`; rec != want {
		t.Fatalf("record %s, want %s", rec, want)
	}
	for i := 0; i < 2; i++ {
		if err := c.Resync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	next := patchPod(map[string]any{}, map[string]any{"note": "x"}, map[string]any{"k": "v"})
	if err := c.Handle(ctx, pod, next); err != nil {
		t.Fatal(err)
	}
	l, a, d, rec := cmState(t, store, "copy")
	if !reflect.DeepEqual(l, map[string]string{"own": "l"}) || !reflect.DeepEqual(a, map[string]string{"own": "a", "note": "x"}) ||
		!reflect.DeepEqual(d, map[string]any{"own": "o", "k": "v"}) {
		t.Errorf("after a Resync and a smaller output: labels %v annotations %v data %v", l, a, d)
	}
	if want := `["/data/k","/metadata/annotations/note"]`; rec != want {
		t.Errorf("record %s, want %s", rec, want)
	}
}

// TestPatcherRemovesDroppedFieldsAfterRestart: a new Controller over the
// same target objects (a manager restart) removes the fields the output
// dropped while it was down, and all of them for an object whose output
// is gone; the result equals a fresh run on the final sources, plus what
// others set.
func TestPatcherRemovesDroppedFieldsAfterRestart(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	patchTargetCM(t, store)
	client := StoreClient{Store: store}
	c := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: client})
	pod := patchPod(map[string]any{"tier": "gold"}, map[string]any{"note": "x", "team": "a"}, map[string]any{"k": "v", "gone": "soon"})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	// Restart with a source that dropped some fields.
	final := patchPod(map[string]any{}, map[string]any{"team": "a"}, map[string]any{"k": "w"})
	c2 := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: client})
	if err := c2.HandleBatch(ctx, []Change{{New: final}}); err != nil {
		t.Fatal(err)
	}
	if err := c2.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	l, a, d, rec := cmState(t, store, "copy")
	if !reflect.DeepEqual(l, map[string]string{"own": "l"}) || !reflect.DeepEqual(a, map[string]string{"own": "a", "team": "a"}) ||
		!reflect.DeepEqual(d, map[string]any{"own": "o", "k": "w"}) {
		t.Errorf("after a restart: labels %v annotations %v data %v", l, a, d)
	}
	// A fresh run on the final source writes the same object.
	fresh := view.NewStore()
	patchTargetCM(t, fresh)
	c3 := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: StoreClient{Store: fresh}})
	if err := c3.Handle(ctx, nil, final); err != nil {
		t.Fatal(err)
	}
	fl, fa, fd, frec := cmState(t, fresh, "copy")
	if !reflect.DeepEqual([]any{l, a, d, rec}, []any{fl, fa, fd, frec}) {
		t.Errorf("restarted %v %v %v %s, fresh run %v %v %v %s", l, a, d, rec, fl, fa, fd, frec)
	}
	// Restart again, the source deleted while down: the output has nothing
	// for the object, and Resync removes every field the record lists.
	c4 := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: client})
	if err := c4.HandleBatch(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := c4.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	cm, _ := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	if !reflect.DeepEqual(cm.GetLabels(), map[string]string{"own": "l"}) || !reflect.DeepEqual(cm.GetAnnotations(), map[string]string{"own": "a"}) ||
		!reflect.DeepEqual(cm.Object["data"], map[string]any{"own": "o"}) {
		t.Errorf("after a restart without the source: %v", cm.Object)
	}
}

// TestPatcherRecordKeepsOthersFields: a field that already held the
// patch's value is not recorded and stays after a restart that drops it
// from the output; two Patchers on one object each keep their own record
// and remove only their own fields.
func TestPatcherRecordKeepsOthersFields(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	patchTargetCM(t, store)
	client := StoreClient{Store: store}
	a := mustNew(t, patchCopy("a"), Options{Operator: "test", Client: client})
	b := mustNew(t, `
name: b
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline: {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", annotations: {"b": "$.spec.b"}}}}
target: {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
`, Options{Operator: "test", Client: client})
	pod := patchPod(map[string]any{"own": "l"}, map[string]any{"note": "x"}, nil)
	pod.Object["spec"].(map[string]any)["b"] = "1"
	for _, c := range []*Controller{a, b} {
		if err := c.Handle(ctx, nil, pod); err != nil {
			t.Fatal(err)
		}
	}
	cm, _ := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	ann := cm.GetAnnotations()
	if ann[PatchRecordAnnotation("test", "a")] != `["/metadata/annotations/note"]` || ann[PatchRecordAnnotation("test", "b")] != `["/metadata/annotations/b"]` {
		t.Fatalf("records: %v", ann)
	}
	// a restarts with an output that sets nothing; b's output is the same.
	final := patchPod(nil, nil, nil)
	final.Object["spec"].(map[string]any)["b"] = "1"
	a2 := mustNew(t, patchCopy("a"), Options{Operator: "test", Client: client})
	if err := a2.HandleBatch(ctx, []Change{{New: final}}); err != nil {
		t.Fatal(err)
	}
	if err := a2.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	cm, _ = store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	if !reflect.DeepEqual(cm.GetLabels(), map[string]string{"own": "l"}) {
		t.Errorf("labels %v: the label the Patcher found in place must stay", cm.GetLabels())
	}
	want := map[string]string{"own": "a", "b": "1", PatchRecordAnnotation("test", "b"): `["/metadata/annotations/b"]`}
	if got := cm.GetAnnotations(); !reflect.DeepEqual(got, want) {
		t.Errorf("annotations %v, want %v", got, want)
	}
}

// TestPatchRecordEncoding: records are sorted JSON Pointers (RFC 6901) that
// read back as the same paths; metadata.name and namespace, malformed
// pointers and overlapping paths are handled as parsePatchRecord says.
func TestPatchRecordEncoding(t *testing.T) {
	owned := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"a/b~c": "x", "": "e"}},
		"spec":     map[string]any{"list": []any{1}, "m": map[string]any{"n": nil}},
	}
	rec := encodePatchRecord(owned)
	if want := `["/metadata/annotations/","/metadata/annotations/a~1b~0c","/spec/list","/spec/m/n"]`; rec != want {
		t.Fatalf("record %s, want %s", rec, want)
	}
	doc, err := parsePatchRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := object.LeafPaths(doc), object.LeafPaths(owned); !reflect.DeepEqual(got, want) {
		t.Errorf("paths %v, want %v", got, want)
	}
	if encodePatchRecord(map[string]any{"spec": map[string]any{}}) != "" {
		t.Error("a record of no leaves must be empty")
	}
	doc, err = parsePatchRecord(`["/metadata/name","/metadata/namespace","/spec","/spec/a","/data/x/y","/data/x"]`)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"spec": true, "data": map[string]any{"x": map[string]any{"y": true}}}; !reflect.DeepEqual(doc, want) {
		t.Errorf("parsed %v, want %v", doc, want)
	}
	for _, bad := range []string{`{"a":1}`, `["spec"]`, `[""]`, `["/a~2"]`, `["/a~"]`, `[1]`} {
		if _, err := parsePatchRecord(bad); err == nil {
			t.Errorf("parsePatchRecord(%s): no error", bad)
		}
	}
}

// TestPatchRecordAnnotationKey: a readable key when the names make a valid
// annotation key, a hashed one otherwise; distinct controllers get
// distinct keys.
func TestPatchRecordAnnotationKey(t *testing.T) {
	if got := PatchRecordAnnotation("op", "ctl"); got != "patcher.dcontroller.io/op_ctl" {
		t.Errorf("key %s", got)
	}
	long := PatchRecordAnnotation("op", strings.Repeat("c", 70))
	spaced := PatchRecordAnnotation("op", "my controller")
	for _, k := range []string{long, spaced} {
		if !strings.HasPrefix(k, PatchRecordPrefix+"h-") || len(k) != len(PatchRecordPrefix)+2+16 {
			t.Errorf("key %s: want a hashed key", k)
		}
	}
	if long == spaced || PatchRecordAnnotation("a.b", "c") == PatchRecordAnnotation("a", "b.c") {
		t.Error("two controllers share a key")
	}
}

// TestPatcherOutputCannotWriteItsRecord: an output that copies the
// annotations of the object it patches, the record among them, does not
// write an old record over the new one.
func TestPatcherOutputCannotWriteItsRecord(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	patchTargetCM(t, store)
	c := mustNew(t, patchCopy("copy"), Options{Operator: "test", Client: StoreClient{Store: store}})
	key := PatchRecordAnnotation("test", "copy")
	pod := patchPod(nil, map[string]any{"note": "x", key: `["/metadata/annotations/own"]`}, nil)
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	_, a, _, rec := cmState(t, store, "copy")
	if rec != `["/metadata/annotations/note"]` || !reflect.DeepEqual(a, map[string]string{"own": "a", "note": "x"}) {
		t.Errorf("annotations %v, record %s", a, rec)
	}
}
