package view

import (
	"reflect"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// TestStoreKeepsWrittenValues: a stored object shares the values below
// metadata with what its writer passed (a controller's output is held
// once, not twice), has metadata of its own (the writer's object does
// not get the store's resourceVersion), and handlers receive the stored
// object itself; Get still hands out copies.
func TestStoreKeepsWrittenValues(t *testing.T) {
	s := NewStore()
	var events []Event
	s.Subscribe(func(ev Event) { events = append(events, ev) })
	spec := map[string]any{"containers": []any{map[string]any{"name": "c"}}}
	in := pod("a", spec)
	if _, err := s.Create(in); err != nil {
		t.Fatal(err)
	}
	key := object.Key{Namespace: "default", Name: "a"}
	stored := s.objects[podGVK][key]
	if reflect.ValueOf(stored.Object["spec"]).UnsafePointer() != reflect.ValueOf(spec).UnsafePointer() {
		t.Fatal("the store copied the written spec: a view object then costs its output twice")
	}
	if in.GetResourceVersion() != "" {
		t.Fatalf("the writer's object got the store's resourceVersion %q: the store must set metadata on its own map", in.GetResourceVersion())
	}
	if len(events) != 1 || events[0].Object != stored {
		t.Fatalf("the handler got %d events, the first not the stored object", len(events))
	}
	got, err := s.Get(podGVK, key)
	if err != nil {
		t.Fatal(err)
	}
	got.Object["spec"].(map[string]any)["containers"] = nil
	if s.objects[podGVK][key].Object["spec"].(map[string]any)["containers"] == nil {
		t.Fatal("Get handed out the stored object, not a copy")
	}

	spec2 := map[string]any{"replicas": int64(2)}
	up := pod("a", spec2)
	if _, err := s.Update(up); err != nil {
		t.Fatal(err)
	}
	stored2 := s.objects[podGVK][key]
	if reflect.ValueOf(stored2.Object["spec"]).UnsafePointer() != reflect.ValueOf(spec2).UnsafePointer() {
		t.Fatal("the store copied the updated spec")
	}
	if len(events) != 2 || events[1].Object != stored2 || events[1].Old != stored {
		t.Fatal("the update's handler did not get the stored new and old objects")
	}
	if stored.GetResourceVersion() == stored2.GetResourceVersion() {
		t.Fatal("the update did not get a new resourceVersion")
	}
}
