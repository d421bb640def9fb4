package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// metaCopySpec copies the labels and annotations a Pod lists in its spec to
// a ConfigMap of the same name.
const metaCopySpec = `
name: %s
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: "$.metadata.name"
      namespace: "$.metadata.namespace"
      labels: "$.spec.labels"
      annotations: "$.spec.annotations"
    data: {image: "$.spec.image"}
target: {apiGroup: "", version: v1, kind: ConfigMap}
`

func metaPod(labels, annotations map[string]any) *unstructured.Unstructured {
	return obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a", "labels": labels, "annotations": annotations}})
}

// fakeClock is a settable Options.Now.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time          { return f.t }
func (f *fakeClock) advance(d time.Duration) { f.t = f.t.Add(d) }
func newClock() *fakeClock                   { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }
func named(name string) string               { return strings.Replace(metaCopySpec, "%s", name, 1) }
func (f *fakeClock) opts(client Client) Options {
	return Options{Operator: "test", Client: client, Now: f.now}
}
func withLive(o Options, live func(string) bool) Options { o.OwnerLive = live; return o }

func mustNew(t *testing.T, y string, opts Options) *Controller {
	t.Helper()
	c, err := New(spec(t, y), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUpdaterRemovesDroppedMetadata: labels and annotations the output no
// longer sets are removed, in the same run and after a restart (a new
// Controller over the same objects, with no memory of earlier writes);
// labels and annotations set by others are kept.
func TestUpdaterRemovesDroppedMetadata(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := StoreClient{Store: store}
	key := object.Key{Namespace: "ns", Name: "p"}
	c := mustNew(t, named("copy"), Options{Operator: "test", Client: client})
	pod := metaPod(map[string]any{"tier": "gold", "team": "a"}, map[string]any{"note": "x"})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	cm, _ := store.Get(cmGVK, key)
	if l := cm.GetLabels(); l["tier"] != "gold" || l["team"] != "a" {
		t.Fatalf("labels %v", l)
	}
	if got := parseManagedKeys(cm.GetAnnotations()); !reflect.DeepEqual(got.Labels, []string{"team", "tier"}) || !reflect.DeepEqual(got.Annotations, []string{"note"}) || got.Output == "" {
		t.Fatalf("managed-metadata annotation %+v", got)
	}
	// Someone else labels and annotates the target.
	cm.SetLabels(map[string]string{"tier": "gold", "team": "a", "extra": "kept"})
	ann := cm.GetAnnotations()
	ann["other"] = "kept"
	cm.SetAnnotations(ann)
	if _, err := store.Update(cm); err != nil {
		t.Fatal(err)
	}
	// The output drops tier.
	next := metaPod(map[string]any{"team": "a"}, map[string]any{"note": "x"})
	if err := c.Handle(ctx, pod, next); err != nil {
		t.Fatal(err)
	}
	cm, _ = store.Get(cmGVK, key)
	if l := cm.GetLabels(); len(l) != 2 || l["team"] != "a" || l["extra"] != "kept" {
		t.Fatalf("labels after the output dropped tier: %v", l)
	}
	// A restart: a new controller sees the final source, without labels or
	// annotations, and reconciles what is there.
	c2 := mustNew(t, named("copy"), Options{Operator: "test", Client: client})
	final := metaPod(map[string]any{}, map[string]any{})
	if err := c2.HandleBatch(ctx, []Change{{New: final}}); err != nil {
		t.Fatal(err)
	}
	if err := c2.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	cm, _ = store.Get(cmGVK, key)
	if l := cm.GetLabels(); len(l) != 1 || l["extra"] != "kept" {
		t.Errorf("labels after restart: %v", l)
	}
	a := cm.GetAnnotations()
	if _, ok := a["note"]; ok || a["other"] != "kept" || a[opv1a1.OwnerAnnotation] != "test/copy" {
		t.Errorf("annotations after restart: %v", a)
	}
	if m := parseManagedKeys(a); len(m.Labels) != 0 || len(m.Annotations) != 0 || m.Output == "" {
		t.Errorf("managed-metadata annotation %q: want only the output digest, the output sets no labels or annotations", a[ManagedMetadataAnnotation])
	}
	// What is left equals a fresh run on the final source, plus what others set.
	fresh := view.NewStore()
	c3 := mustNew(t, named("copy"), Options{Operator: "test", Client: StoreClient{Store: fresh}})
	if err := c3.Handle(ctx, nil, metaPod(map[string]any{}, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	want, _ := fresh.Get(cmGVK, key)
	if len(want.GetLabels()) != 0 || len(want.GetAnnotations()) != 2 || want.GetAnnotations()[ManagedMetadataAnnotation] != a[ManagedMetadataAnnotation] {
		t.Errorf("fresh run: labels %v annotations %v (restarted: %v)", want.GetLabels(), want.GetAnnotations(), a)
	}
}

// TestUpdaterOwnerConflict: a second controller whose output names an
// object another running controller owns leaves it alone, reports it, and
// does not retry in a loop; once the owner is gone it adopts the object.
func TestUpdaterOwnerConflict(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	key := object.Key{Namespace: "ns", Name: "p"}
	aLive := true
	live := func(owner string) bool { return owner != "test/a" || aLive }
	clock := newClock()
	a := mustNew(t, named("a"), withLive(clock.opts(client), live))
	b := mustNew(t, named("b"), withLive(clock.opts(client), live))
	pod := metaPod(map[string]any{"by": "a"}, map[string]any{})
	if err := a.Handle(ctx, nil, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	podB := metaPod(map[string]any{"by": "b"}, map[string]any{})
	writes := client.writes
	if err := b.Handle(ctx, nil, podB.DeepCopy()); err != nil {
		t.Fatalf("an owner conflict is not a write error: %v", err)
	}
	cm, _ := store.Get(cmGVK, key)
	if cm.GetAnnotations()[opv1a1.OwnerAnnotation] != "test/a" || cm.GetLabels()["by"] != "a" || client.writes != writes {
		t.Fatalf("the second controller took the object over: %v (%d writes)", cm.Object, client.writes-writes)
	}
	conf := b.Targets()[0].Conflicts()
	if len(conf) != 1 || conf[0].Key != key || conf[0].Owner != "test/a" || b.Pending() != 0 {
		t.Fatalf("conflicts %v pending %d", conf, b.Pending())
	}
	if msg := b.Targets()[0].ConflictMessage(); msg != "ConfigMap ns/p is owned by test/a (annotation dcontroller.io/owner); not taking it over while that controller runs" {
		t.Errorf("message %q", msg)
	}
	if !b.Targets()[0].Tracks(cm) {
		t.Error("a conflicting object is not tracked: its owner's changes would not be seen")
	}
	// The owner keeps writing; the second controller keeps out.
	if err := a.Handle(ctx, pod, metaPod(map[string]any{"by": "a", "v": "2"}, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	writes = client.writes
	for i := 0; i < 3; i++ {
		if _, err := b.Targets()[0].RestoreTarget(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	if client.writes != writes {
		t.Errorf("%d writes while the owner runs", client.writes-writes)
	}
	// The owner stops: its object is adopted.
	aLive = false
	if _, err := b.Targets()[0].RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	cm, _ = store.Get(cmGVK, key)
	if cm.GetAnnotations()[opv1a1.OwnerAnnotation] != "test/b" || cm.GetLabels()["by"] != "b" || len(b.Targets()[0].Conflicts()) != 0 {
		t.Errorf("not adopted: %v, conflicts %v", cm.Object, b.Targets()[0].Conflicts())
	}
	// Labels the old owner set and the new one does not are not the new
	// owner's to remove.
	if cm.GetLabels()["v"] != "2" {
		t.Errorf("labels after adoption: %v", cm.GetLabels())
	}
}

// TestRestoreTarget: changes by others are undone, the controller's own
// writes are not rewritten, and repeated restores of one object back off.
func TestRestoreTarget(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	key := object.Key{Namespace: "ns", Name: "p"}
	clock := newClock()
	c := mustNew(t, named("copy"), clock.opts(client))
	if err := c.Handle(ctx, nil, metaPod(map[string]any{"tier": "gold"}, map[string]any{})); err != nil {
		t.Fatal(err)
	}
	cm, _ := store.Get(cmGVK, key)
	if !c.Targets()[0].Tracks(cm) {
		t.Fatal("the controller does not track its own target")
	}
	other := obj(cmGVK, "ns", "other", nil)
	if c.Targets()[0].Tracks(other) {
		t.Error("an unrelated object is tracked")
	}
	// The echo of the controller's own write: nothing to do.
	writes := client.writes
	if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || client.writes != writes {
		t.Fatalf("own write: wait %v err %v writes %d", wait, err, client.writes-writes)
	}
	// A label someone else adds, and then removes again: no write.
	for _, labels := range []map[string]string{{"tier": "gold", "user": "x"}, {"tier": "gold"}} {
		cur, _ := store.Get(cmGVK, key)
		cur.SetLabels(labels)
		if _, err := store.Update(cur); err != nil {
			t.Fatal(err)
		}
		if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || client.writes != writes {
			t.Fatalf("foreign labels %v: wait %v err %v writes %d", labels, wait, err, client.writes-writes)
		}
	}
	tamper := func() {
		t.Helper()
		cur, err := store.Get(cmGVK, key)
		if err != nil {
			t.Fatal(err)
		}
		cur.Object["data"] = map[string]any{"image": "tampered"}
		if _, err := store.Update(cur); err != nil {
			t.Fatal(err)
		}
	}
	restored := func() bool {
		cur, err := store.Get(cmGVK, key)
		return err == nil && cur.Object["data"].(map[string]any)["image"] == "a" && cur.GetLabels()["tier"] == "gold"
	}
	// The first change is undone at once, and so is a deletion.
	tamper()
	if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || !restored() {
		t.Fatalf("first restore: wait %v err %v", wait, err)
	}
	clock.advance(2 * RestoreQuiet)
	if err := store.Delete(cmGVK, key); err != nil {
		t.Fatal(err)
	}
	if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || !restored() {
		t.Fatalf("restore of a deleted target: wait %v err %v", wait, err)
	}
	// Someone keeps changing it: each restore waits twice as long.
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		tamper()
		writes := client.writes
		wait, err := c.Targets()[0].RestoreTarget(ctx, key)
		if err != nil || wait != want || client.writes != writes || restored() {
			t.Fatalf("restore %d: wait %v (want %v), err %v, %d writes", i+2, wait, want, err, client.writes-writes)
		}
		clock.advance(wait)
		if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || !restored() {
			t.Fatalf("restore %d after the backoff: wait %v err %v", i+2, wait, err)
		}
	}
	ct := c.Targets()[0].Contested()
	if len(ct) != 1 || ct[0].Key != key || ct[0].Restores != 4 || ct[0].NextDelay != 8*time.Second {
		t.Fatalf("contested %+v", ct)
	}
	if msg := c.Targets()[0].ContestedMessage(); !strings.HasPrefix(msg, "ConfigMap ns/p keeps being changed by another writer") {
		t.Errorf("message %q", msg)
	}
	// Left alone long enough, it starts over: the next change is undone at once.
	clock.advance(2 * RestoreQuiet)
	if ct := c.Targets()[0].Contested(); len(ct) != 0 {
		t.Errorf("still contested after a quiet period: %+v", ct)
	}
	tamper()
	if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || !restored() {
		t.Fatalf("restore after a quiet period: wait %v err %v", wait, err)
	}
}

// TestRestorePatcherTarget: a Patcher restores only its own fields.
func TestRestorePatcherTarget(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	key := object.Key{Namespace: "ns", Name: "p"}
	c := mustNew(t, patcherSpec, newClock().opts(client))
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}}}})
	created, err := store.Create(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, nil, created.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	cur, _ := store.Get(podGVK, key)
	cur.SetAnnotations(map[string]string{"n": "7", "first": "a", "user": "x"})
	if _, err := store.Update(cur); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	cur, _ = store.Get(podGVK, key)
	if a := cur.GetAnnotations(); a["n"] != "1" || a["user"] != "x" {
		t.Fatalf("annotations after restore: %v", a)
	}
	// A change of a field it does not own: no write.
	cur.SetLabels(map[string]string{"l": "v"})
	if _, err := store.Update(cur); err != nil {
		t.Fatal(err)
	}
	writes := client.writes
	if _, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || client.writes != writes {
		t.Fatalf("restore after a foreign change: %v, %d writes", err, client.writes-writes)
	}
}

// fieldCopySpec copies a Pod's spec.fields into a target's data.
const fieldCopySpec = `
name: fields
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    data: "$.spec.fields"
target: {%s}
`

// A field the output dropped while the controller was not running is gone
// after the restart, on a native target (the output digest in the record
// differs) and on a view target (compared as a whole); a field someone
// else added to a native target while the output stayed the same is not
// worth a write.
func TestUpdaterRemovesFieldDroppedDuringRestart(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		gvk          schema.GroupVersionKind
	}{
		{"native", `apiGroup: "", version: v1, kind: ConfigMap`, cmGVK},
		{"view", `kind: Copy`, schema.GroupVersionKind{Group: "test.view.dcontroller.io", Version: "v1alpha1", Kind: "Copy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := view.NewStore()
			client := StoreClient{Store: store}
			y := strings.Replace(fieldCopySpec, "%s", tc.target, 1)
			key := object.Key{Namespace: "ns", Name: "p"}
			pod := func(fields map[string]any) *unstructured.Unstructured {
				return obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"fields": fields}})
			}
			c := mustNew(t, y, Options{Operator: "test", Client: client})
			if err := c.Handle(ctx, nil, pod(map[string]any{"a": "1", "b": "2"})); err != nil {
				t.Fatal(err)
			}
			// Restart: the new controller sees the source without b.
			c2 := mustNew(t, y, Options{Operator: "test", Client: client})
			if err := c2.HandleBatch(ctx, []Change{{New: pod(map[string]any{"a": "1"})}}); err != nil {
				t.Fatal(err)
			}
			if err := c2.Resync(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := store.Get(tc.gvk, key)
			if err != nil {
				t.Fatal(err)
			}
			if data := got.Object["data"]; !reflect.DeepEqual(data, map[string]any{"a": "1"}) {
				t.Fatalf("data after the restart: %v, want only a", data)
			}
			if tc.name != "native" {
				return
			}
			// A field a default-setter adds is kept without a write.
			got.Object["data"].(map[string]any)["defaulted"] = "x"
			if _, err := store.Update(got); err != nil {
				t.Fatal(err)
			}
			c3 := mustNew(t, y, Options{Operator: "test", Client: client})
			if err := c3.HandleBatch(ctx, []Change{{New: pod(map[string]any{"a": "1"})}}); err != nil {
				t.Fatal(err)
			}
			if err := c3.Resync(ctx); err != nil {
				t.Fatal(err)
			}
			if n := c3.Counters().Writes; n != 0 {
				t.Errorf("%d writes for an object whose output did not change", n)
			}
		})
	}
}

// TestRestoreAfterOwnUpdate: the echo of the controller's own update (not
// only of its create) is no reason to write, so a target whose output
// changes several times in a row is not taken for one another writer
// keeps changing.
func TestRestoreAfterOwnUpdate(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	key := object.Key{Namespace: "ns", Name: "p"}
	clock := newClock()
	c := mustNew(t, named("copy"), clock.opts(client))
	pod := metaPod(map[string]any{"tier": "gold"}, map[string]any{})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	for i, image := range []string{"b", "c", "d", "e"} {
		next := pod.DeepCopy()
		next.Object["spec"].(map[string]any)["image"] = image
		if err := c.Handle(ctx, pod, next); err != nil {
			t.Fatal(err)
		}
		pod = next
		writes := client.writes
		if wait, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil || wait != 0 || client.writes != writes {
			t.Fatalf("update %d: echo of the own write: wait %v err %v writes %d", i, wait, err, client.writes-writes)
		}
	}
	if got := c.Targets()[0].Contested(); len(got) != 0 {
		t.Errorf("contested after the controller's own updates: %+v", got)
	}
	cm, _ := store.Get(cmGVK, key)
	if img, _, _ := unstructured.NestedString(cm.Object, "data", "image"); img != "e" {
		t.Errorf("data.image = %q, want e", img)
	}
}

// TestOutputMetadataValues: an Updater refuses an output whose labels or
// annotations hold a value that is not a string, naming the key, instead
// of dropping them all; null values are written as "" and a null map is
// left out, as the API server stores them.
func TestOutputMetadataValues(t *testing.T) {
	const y = `
name: meta
sources: [{apiGroup: example.com, version: v1, kind: Src}]
pipeline:
  "@project":
    - {"$.": "$.spec.out"}
    - metadata: {name: $.metadata.name, namespace: $.metadata.namespace}
target: {apiGroup: example.com, version: v1, kind: Out}
`
	src := func(name string, meta map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Src",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     map[string]any{"out": map[string]any{"metadata": meta}},
		}}
		return u
	}
	for _, tc := range []struct {
		name    string
		meta    map[string]any
		wantErr string
		check   func(t *testing.T, u *unstructured.Unstructured)
	}{
		{name: "number annotation", meta: map[string]any{"annotations": map[string]any{"good": "x", "bad": int64(5)}},
			wantErr: `metadata.annotations["bad"] is 5 (int64), want a string`},
		{name: "map label", meta: map[string]any{"labels": map[string]any{"a": map[string]any{"x": int64(1)}}},
			wantErr: `metadata.labels["a"] is map[x:1] (map[string]interface {}), want a string`},
		{name: "annotations not a map", meta: map[string]any{"annotations": "str"},
			wantErr: `metadata.annotations is string, want a map of strings`},
		{name: "null values", meta: map[string]any{"labels": map[string]any{"a": nil, "b": "1"}, "annotations": map[string]any{"n": nil}},
			check: func(t *testing.T, u *unstructured.Unstructured) {
				if l := u.GetLabels(); len(l) != 2 || l["a"] != "" || l["b"] != "1" {
					t.Errorf("labels %v, want a: \"\", b: 1", u.Object["metadata"])
				}
				if a, ok := u.Object["metadata"].(map[string]any)["annotations"].(map[string]any)["n"].(string); !ok || a != "" {
					t.Errorf("annotation n %v, want \"\"", u.Object["metadata"])
				}
			}},
		{name: "null labels", meta: map[string]any{"labels": nil},
			check: func(t *testing.T, u *unstructured.Unstructured) {
				if _, ok := u.Object["metadata"].(map[string]any)["labels"]; ok {
					t.Errorf("metadata %v keeps a null labels map", u.Object["metadata"])
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFakeWriter()
			c, err := New(spec(t, y), Options{Operator: "op", Client: w})
			if err != nil {
				t.Fatal(err)
			}
			err = c.HandleBatch(context.Background(), []Change{{New: src("s", tc.meta)}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if len(w.objs) != 0 {
					t.Fatalf("wrote %v", w.objs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u := w.objs[object.Key{Namespace: "default", Name: "s"}]
			if u == nil {
				t.Fatal("nothing written")
			}
			tc.check(t, u)
		})
	}
}

// TestPatcherTargetRecreated: a Patcher target object (another object than
// its source) that is deleted and created again is one the controller
// tracks, and the restore check that its watch event brings patches it
// again, as `dctl eval` would on the final objects.
func TestPatcherTargetRecreated(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	key := object.Key{Namespace: "ns", Name: "p"}
	clock := newClock()
	c := mustNew(t, `
name: mark
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: "$.metadata.name"
      namespace: "$.metadata.namespace"
      annotations: {"n": {"@string": {"@len": "$.spec.containers"}}}
target: {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
`, clock.opts(client))
	tgt := c.Targets()[0]
	// restore runs a restore check as the runtime does: again after the
	// wait it returns (restores of one object back off).
	restore := func() {
		for {
			wait, err := tgt.RestoreTarget(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				return
			}
			clock.advance(wait)
		}
	}
	fresh := func() *unstructured.Unstructured {
		created, err := store.Create(obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"k": "v"}}))
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	fresh()
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}}}})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if cur, _ := store.Get(cmGVK, key); cur == nil || cur.GetAnnotations()["n"] != "1" {
			t.Fatalf("round %d: the target is not patched: %v", round, cur)
		}
		gone, _ := store.Get(cmGVK, key)
		if err := store.Delete(cmGVK, key); err != nil {
			t.Fatal(err)
		}
		// The deletion's watch event.
		if !tgt.Tracks(gone) {
			t.Fatalf("round %d: the deleted target is not tracked", round)
		}
		restore()
		// Created again by someone else, without the annotation: its
		// watch event.
		again := fresh()
		if !tgt.Tracks(again) {
			t.Fatalf("round %d: the target created again is not tracked", round)
		}
		restore()
	}
	if cur, _ := store.Get(cmGVK, key); cur.GetAnnotations()["n"] != "1" || cur.Object["data"].(map[string]any)["k"] != "v" {
		t.Fatalf("after the last re-creation: %v", cur.Object)
	}
	// An object of the kind the output has nothing for is not tracked.
	other := obj(cmGVK, "ns", "other", nil)
	if tgt.Tracks(other) {
		t.Fatal("an object without output is tracked")
	}
}
