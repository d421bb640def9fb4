package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// laggingClient serves Get from a stand-in for an informer cache that lags
// behind the store: an object in stale is served as it is there; GetLive
// (LiveReader) reads the store, as the API server would answer.
type laggingClient struct {
	StoreClient
	stale  map[object.Key]*unstructured.Unstructured
	writes int
}

func (c *laggingClient) Get(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if o := c.stale[key]; o != nil {
		return o.DeepCopy(), nil
	}
	return c.StoreClient.Get(ctx, gvk, key)
}

func (c *laggingClient) GetLive(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	return c.StoreClient.Get(ctx, gvk, key)
}

func (c *laggingClient) Create(ctx context.Context, o *unstructured.Unstructured) error {
	c.writes++
	return c.StoreClient.Create(ctx, o)
}
func (c *laggingClient) Update(ctx context.Context, o *unstructured.Unstructured) error {
	c.writes++
	return c.StoreClient.Update(ctx, o)
}
func (c *laggingClient) UpdateStatus(ctx context.Context, o *unstructured.Unstructured) error {
	c.writes++
	return c.StoreClient.UpdateStatus(ctx, o)
}
func (c *laggingClient) Patch(ctx context.Context, g schema.GroupVersionKind, k object.Key, p []byte) error {
	c.writes++
	return c.StoreClient.Patch(ctx, g, k, p)
}
func (c *laggingClient) PatchStatus(ctx context.Context, g schema.GroupVersionKind, k object.Key, p []byte) error {
	c.writes++
	return c.StoreClient.PatchStatus(ctx, g, k, p)
}
func (c *laggingClient) Apply(ctx context.Context, o *unstructured.Unstructured, fm string) error {
	c.writes++
	return c.StoreClient.Apply(ctx, o, fm)
}
func (c *laggingClient) ApplyStatus(ctx context.Context, o *unstructured.Unstructured, fm string) error {
	c.writes++
	return c.StoreClient.ApplyStatus(ctx, o, fm)
}

// echoSpec copies a Pod's image into a Widget's spec (main endpoint) or
// status (the status subresource) with a target of type %s.
const echoSpec = `
name: echo
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    %s: {image: "$.spec.image"}
target: {apiGroup: example.com, version: v1, kind: Widget, type: %s}
`

// TestRestoreEchoOfEarlierWrite: the watch event of an earlier write of
// the controller (output A written, then output B; the event, and the
// informer cache it comes from, still show A) is no change by another
// writer: the restore check writes nothing and counts no restore, however
// many such echoes arrive, for every target type and for the main endpoint
// and the status subresource. A change by another writer is still
// restored and counted.
func TestRestoreEchoOfEarlierWrite(t *testing.T) {
	for _, typ := range []string{"Updater", "Patcher", "Applier"} {
		for _, field := range []string{"spec", "status"} {
			t.Run(typ+"/"+field, func(t *testing.T) {
				ctx := context.Background()
				store := view.NewStore()
				client := &laggingClient{StoreClient: StoreClient{Store: store, StatusSubresource: func(g schema.GroupVersionKind) bool { return g == widgetGVK }}}
				key := object.Key{Namespace: "ns", Name: "p"}
				if typ == "Patcher" {
					// A Patcher writes only objects that exist.
					if err := client.StoreClient.Create(ctx, obj(widgetGVK, "ns", "p", nil)); err != nil {
						t.Fatal(err)
					}
				}
				clock := newClock()
				opts := clock.opts(client)
				opts.HasStatus = func(g schema.GroupVersionKind) (bool, error) { return g == widgetGVK, nil }
				c := mustNew(t, fmt.Sprintf(echoSpec, field, typ), opts)
				tg := c.Targets()[0]
				pod := func(image string) *unstructured.Unstructured {
					return obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": image}})
				}
				image := func() any {
					cur, err := store.Get(widgetGVK, key)
					if err != nil {
						t.Fatal(err)
					}
					v, _, _ := unstructured.NestedString(cur.Object, field, "image")
					return v
				}
				var prev *unstructured.Unstructured
				for i, img := range []string{"a", "b", "c", "d", "e"} {
					if err := c.Handle(ctx, prev, pod(img)); err != nil {
						t.Fatal(err)
					}
					prev = pod(img)
					if i == 0 {
						continue
					}
					// The echo of the write of the previous output.
					echo := func() *unstructured.Unstructured {
						cur, _ := store.Get(widgetGVK, key)
						_ = unstructured.SetNestedField(cur.Object, []string{"a", "b", "c", "d", "e"}[i-1], field, "image")
						return cur
					}()
					client.stale = map[object.Key]*unstructured.Unstructured{key: echo}
					writes := client.writes
					if wait, err := tg.RestoreTarget(ctx, key); err != nil || wait != 0 {
						t.Fatalf("echo %d: wait %v err %v", i, wait, err)
					}
					if client.writes != writes {
						t.Errorf("echo %d: %d writes", i, client.writes-writes)
					}
					if got := image(); got != img {
						t.Errorf("echo %d: %s.image %v, want %s", i, field, got, img)
					}
					clock.advance(100 * time.Millisecond) // the echoes come in quick succession
				}
				tg.mu.Lock()
				rs := tg.restores[key]
				tg.mu.Unlock()
				if rs != nil {
					t.Errorf("echoes counted as %d restores", rs.n)
				}
				if ct := tg.Contested(); len(ct) != 0 {
					t.Errorf("contested after echoes of its own writes: %+v", ct)
				}
				if got := c.Counters(); got.WriteErrors != 0 {
					t.Errorf("write errors %d", got.WriteErrors)
				}
				// Another writer's change is restored, and counted.
				client.stale = nil
				cur, _ := store.Get(widgetGVK, key)
				_ = unstructured.SetNestedField(cur.Object, "tampered", field, "image")
				if field == "status" {
					if err := client.StoreClient.UpdateStatus(ctx, cur); err != nil {
						t.Fatal(err)
					}
				} else if _, err := store.Update(cur); err != nil {
					t.Fatal(err)
				}
				if wait, err := tg.RestoreTarget(ctx, key); err != nil || wait != 0 || image() != "e" {
					t.Fatalf("restore: wait %v err %v image %v", wait, err, image())
				}
				tg.mu.Lock()
				rs = tg.restores[key]
				tg.mu.Unlock()
				if rs == nil || rs.n != 1 {
					t.Errorf("restore not counted: %+v", rs)
				}
			})
		}
	}
}

const annotateSpec = `
name: annotate
sources: [{apiGroup: "", version: v1, kind: ConfigMap}]
pipeline:
  "@project":
    metadata:
      name: "$.metadata.name"
      namespace: "$.metadata.namespace"
      annotations: {touched: "yes"}
target: {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
`

// TestPatcherTargetDeleted: a Patcher whose target objects (here its
// sources too) are deleted reports no error, whichever comes first: the
// restore check of the deleted object while the output still wants it
// (nothing to restore: a Patcher never creates), or the output's removal
// while the informer cache still holds the object (its fields went with
// it). An output that wants an object that does not exist is still
// reported by the ordinary write path.
func TestPatcherTargetDeleted(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &laggingClient{StoreClient: StoreClient{Store: store}}
	c := mustNew(t, annotateSpec, Options{Operator: "test", Client: client})
	tg := c.Targets()[0]
	cms := map[string]*unstructured.Unstructured{}
	for _, name := range []string{"c1", "c2"} {
		cm := obj(cmGVK, "ns", name, map[string]any{"data": map[string]any{"k": "v"}})
		if err := client.StoreClient.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		cms[name], _ = store.Get(cmGVK, object.Key{Namespace: "ns", Name: name})
		if err := c.Handle(ctx, nil, cms[name]); err != nil {
			t.Fatal(err)
		}
		if cur, _ := store.Get(cmGVK, object.Key{Namespace: "ns", Name: name}); cur.GetAnnotations()["touched"] != "yes" {
			t.Fatalf("%s not annotated: %v", name, cur.Object)
		}
	}
	// c1: the target's watch reports the deletion before the source's.
	k1 := object.Key{Namespace: "ns", Name: "c1"}
	if err := store.Delete(cmGVK, k1); err != nil {
		t.Fatal(err)
	}
	writes := client.writes
	if wait, err := tg.RestoreTarget(ctx, k1); err != nil || wait != 0 {
		t.Errorf("restore check of a deleted Patcher target: wait %v err %v", wait, err)
	}
	if err := c.Handle(ctx, cms["c1"], nil); err != nil {
		t.Errorf("removal of c1's output: %v", err)
	}
	// c2: the source's deletion first, the cache still holding the object.
	k2 := object.Key{Namespace: "ns", Name: "c2"}
	client.stale = map[object.Key]*unstructured.Unstructured{k2: cms["c2"]}
	if err := store.Delete(cmGVK, k2); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, cms["c2"], nil); err != nil {
		t.Errorf("removal of c2's output while the cache still holds it: %v", err)
	}
	if wait, err := tg.RestoreTarget(ctx, k2); err != nil || wait != 0 {
		t.Errorf("restore check of c2: wait %v err %v", wait, err)
	}
	client.stale = nil
	if got := c.Counters(); got.WriteErrors != 0 || tg.Pending() != 0 {
		t.Errorf("write errors %d, pending %d", got.WriteErrors, tg.Pending())
	}
	if errs := c.Errors(); len(errs) != 0 {
		t.Errorf("errors recorded: %v", errs)
	}
	if client.writes-writes > 1 {
		t.Errorf("%d writes for deleted objects", client.writes-writes)
	}
	if len(tg.WrittenKeys()) != 0 {
		t.Errorf("still recorded as written: %v", tg.WrittenKeys())
	}
	// An output for an object that does not exist is reported, as before.
	ghost := obj(cmGVK, "ns", "ghost", nil)
	if err := c.Handle(ctx, nil, ghost); err == nil || !errors.Is(err, ErrPatchTargetMissing) {
		t.Errorf("output for a missing object: %v, want %v", err, ErrPatchTargetMissing)
	}
	if tg.Pending() != 1 {
		t.Errorf("missing target not retried: pending %d", tg.Pending())
	}
	// Its restore check (a watch event) neither reports it again nor
	// drops the retry.
	if _, err := tg.RestoreTarget(ctx, object.Key{Namespace: "ns", Name: "ghost"}); err != nil || tg.Pending() != 1 || c.Counters().WriteErrors != 1 {
		t.Errorf("restore check of a missing target: err %v, pending %d, write errors %d", err, tg.Pending(), c.Counters().WriteErrors)
	}
}
