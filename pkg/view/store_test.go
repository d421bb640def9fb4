package view

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

var podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}

func pod(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}}
}

func TestStoreLifecycle(t *testing.T) {
	s := NewStore()
	var events []Event
	cancel := s.Subscribe(func(ev Event) { events = append(events, ev) })

	created, err := s.Create(pod("a", map[string]any{"n": int64(1)}))
	if err != nil {
		t.Fatal(err)
	}
	if created.GetResourceVersion() == "" || created.GetGeneration() != 1 {
		t.Fatalf("create: rv %q generation %d", created.GetResourceVersion(), created.GetGeneration())
	}
	if _, err := s.Create(pod("a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}

	// Same content: no new version, no event.
	same, err := s.Update(pod("a", map[string]any{"n": int64(1)}))
	if err != nil || same.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("no-op update: %v rv %s", err, same.GetResourceVersion())
	}
	if len(events) != 1 {
		t.Fatalf("no-op update produced an event: %d events", len(events))
	}

	// Label change: new version, same generation.
	lab := pod("a", map[string]any{"n": int64(1)})
	lab.SetLabels(map[string]string{"x": "y"})
	upd, err := s.Update(lab)
	if err != nil || upd.GetGeneration() != 1 || upd.GetResourceVersion() == created.GetResourceVersion() {
		t.Fatalf("label update: %v gen %d", err, upd.GetGeneration())
	}
	// Spec change: generation bumps.
	upd2, err := s.Update(pod("a", map[string]any{"n": int64(2)}))
	if err != nil || upd2.GetGeneration() != 2 {
		t.Fatalf("spec update: %v gen %d", err, upd2.GetGeneration())
	}
	// Stale resourceVersion: conflict.
	stale := pod("a", map[string]any{"n": int64(3)})
	stale.SetResourceVersion(created.GetResourceVersion())
	if _, err := s.Update(stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := s.Update(pod("missing", nil)); !apierrors.IsNotFound(err) {
		t.Fatalf("update of missing: %v", err)
	}

	if err := s.Delete(podGVK, object.Key{Namespace: "default", Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(podGVK, object.Key{Namespace: "default", Name: "a"}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
	wantTypes := []EventType{Added, Modified, Modified, Deleted}
	if len(events) != len(wantTypes) {
		t.Fatalf("events: %d, want %d", len(events), len(wantTypes))
	}
	for i, w := range wantTypes {
		if events[i].Type != w {
			t.Errorf("event %d: %s, want %s", i, events[i].Type, w)
		}
	}
	if events[1].Old == nil || events[1].Old.GetLabels() != nil {
		t.Errorf("modified event without the old state")
	}
	cancel()
	if _, err := s.Create(pod("b", nil)); err != nil {
		t.Fatal(err)
	}
	if len(events) != 4 {
		t.Errorf("cancelled subscription still notified")
	}
}

func TestStoreListSortedAndCopied(t *testing.T) {
	s := NewStore()
	for _, n := range []string{"c", "a", "b"} {
		if _, err := s.Create(pod(n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	l := s.List(podGVK)
	if len(l) != 3 || l[0].GetName() != "a" || l[2].GetName() != "c" {
		t.Fatalf("list order: %v", l)
	}
	l[0].SetName("mutated")
	got, err := s.Get(podGVK, object.Key{Namespace: "default", Name: "a"})
	if err != nil || got.GetName() != "a" {
		t.Fatalf("List returned shared objects: %v %v", got, err)
	}
	if k := s.Kinds(); len(k) != 1 || k[0] != podGVK {
		t.Errorf("kinds: %v", k)
	}
	if _, err := s.Create(&unstructured.Unstructured{Object: map[string]any{"kind": "Pod", "apiVersion": "v1"}}); !apierrors.IsBadRequest(err) {
		t.Errorf("nameless create: %v", err)
	}
}

// An object with a NaN or ±Inf number is refused on create and update
// (Invalid, naming the field): nothing is stored, no event is sent, and
// every list of the kind still encodes as JSON.
func TestStoreRefusesNonFinite(t *testing.T) {
	s := NewStore()
	var events []Event
	s.Subscribe(func(ev Event) { events = append(events, ev) })
	if _, err := s.Create(pod("good", map[string]any{"ratio": 0.5})); err != nil {
		t.Fatal(err)
	}
	rv := s.ResourceVersion()
	for _, tc := range []struct {
		name, field string
		write       func() error
	}{
		{"create NaN", "spec.ratio", func() error { _, err := s.Create(pod("bad", map[string]any{"ratio": math.NaN()})); return err }},
		{"create -Inf in a list", "spec.xs[1]", func() error {
			_, err := s.Create(pod("bad", map[string]any{"xs": []any{1.0, math.Inf(-1)}}))
			return err
		}},
		{"update +Inf", "spec.ratio", func() error { _, err := s.Update(pod("good", map[string]any{"ratio": math.Inf(1)})); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field+": Invalid value: ") ||
				!strings.Contains(err.Error(), "not a valid JSON number") {
				t.Fatalf("write = %v, want Invalid naming %s", err, tc.field)
			}
		})
	}
	if got := s.ResourceVersion(); got != rv || len(events) != 1 {
		t.Fatalf("refused writes changed the store: rv %s -> %s, %d events", rv, got, len(events))
	}
	items := s.List(podGVK)
	if len(items) != 1 || items[0].Object["spec"].(map[string]any)["ratio"] != 0.5 {
		t.Fatalf("list = %v, want the good object unchanged", items)
	}
	if _, err := json.Marshal(items); err != nil {
		t.Fatalf("list does not encode: %v", err)
	}
}
