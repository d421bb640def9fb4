package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// policySpec copies each Pod's image into a ConfigMap of the same name;
// %s is the rest of the target.
const policySpec = `
name: copy
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    data: {image: "$.spec.image", replicas: "2"}
target: {apiGroup: "", version: v1, kind: ConfigMap, %s}
`

func policyController(t *testing.T, target string, client Client) *Controller {
	t.Helper()
	return mustNew(t, strings.Replace(policySpec, "%s", target, 1), Options{Operator: "test", Client: client})
}

// TestTargetPolicyErrors: bad externalFields, deletionPolicy and adoption
// are InvalidSpec errors naming their spec path.
func TestTargetPolicyErrors(t *testing.T) {
	view := `target: {kind: Copy, %s}`
	for _, tc := range []struct {
		target, want string
	}{
		{`externalFields: ["spec.containers[0].image"]`, `spec.controllers[0].target.externalFields[0]: "spec.containers[0].image" names a list element`},
		{`externalFields: [data.image, "spec..replicas"]`, `spec.controllers[0].target.externalFields[1]: "spec..replicas" has an empty segment`},
		{`externalFields: [""]`, `spec.controllers[0].target.externalFields[0]: must not be empty`},
		{`externalFields: [metadata.name]`, `spec.controllers[0].target.externalFields[0]: "metadata.name" cannot be handed off`},
		{`externalFields: [metadata.namespace.x]`, `spec.controllers[0].target.externalFields[0]: "metadata.namespace.x" cannot be handed off`},
		{`externalFields: [metadata]`, `spec.controllers[0].target.externalFields[0]: "metadata" cannot be handed off`},
		{`externalFields: [kind]`, `spec.controllers[0].target.externalFields[0]: "kind" is the object's type`},
		{`externalFields: [data.a, data.a]`, `spec.controllers[0].target.externalFields[1]: "data.a" is also externalFields[0]`},
		{`deletionPolicy: Keep`, `spec.controllers[0].target.deletionPolicy: unknown deletion policy "Keep"`},
		{`adoption: Never`, `spec.controllers[0].target.adoption: unknown adoption policy "Never"`},
		{`type: Patcher, adoption: Create`, `spec.controllers[0].target.adoption: Create is not allowed on a Patcher`},
		{view + `externalFields: [data.a]`, `spec.controllers[0].target.externalFields: not allowed on a view target`},
		{view + `adoption: Adopt`, `spec.controllers[0].target.adoption: Adopt is not allowed on a view target`},
	} {
		y := strings.Replace(policySpec, "%s", tc.target, 1)
		if rest, ok := strings.CutPrefix(tc.target, view); ok {
			y = strings.Replace(strings.Replace(policySpec, `target: {apiGroup: "", version: v1, kind: ConfigMap, %s}`, view, 1), "%s", rest, 1)
		}
		_, err := New(spec(t, y), Options{Operator: "test", Client: StoreClient{Store: view_()}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.target, err, tc.want)
		}
	}
	// Good ones compile.
	for _, target := range []string{
		`externalFields: [data.replicas, metadata.labels.tier, metadata.annotations], deletionPolicy: Orphan, adoption: Create`,
		`type: Patcher, adoption: Adopt, deletionPolicy: Delete`,
		`type: Applier, adoption: AdoptOrCreate`,
	} {
		if _, err := New(spec(t, strings.Replace(policySpec, "%s", target, 1)), Options{Operator: "test", Client: StoreClient{Store: view_()}}); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
}

func view_() *view.Store { return view.NewStore() }

// withManager changes the stored object of key and sets a managedFields
// entry of each of managers owning the fields (FieldsV1 form), as the API
// server records writes.
func withManager(t *testing.T, store *view.Store, key object.Key, change func(o map[string]any), managers []string, fields map[string]any) {
	t.Helper()
	o, err := store.Get(cmGVK, key)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: object.DeepCopyMap(o.Object)}
	change(u.Object)
	entries, _, _ := unstructured.NestedSlice(u.Object, "metadata", "managedFields")
	for _, m := range managers {
		entries = append(entries, map[string]any{"manager": m, "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": fields})
	}
	if err := unstructured.SetNestedSlice(u.Object, entries, "metadata", "managedFields"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(u); err != nil {
		t.Fatal(err)
	}
}

// TestExternalFieldsUpdater: an external field is written at creation;
// once another field manager owns it (managedFields), its live value is
// kept when the object is written again and it is not restored, while
// the other fields are; a field another manager wrote on an object the
// target's own manager also owns is not handed off.
func TestExternalFieldsUpdater(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	c := policyController(t, `externalFields: [data.replicas]`, StoreClient{Store: store})
	key := object.Key{Namespace: "ns", Name: "p"}
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	data := func() map[string]any {
		o, _ := store.Get(cmGVK, key)
		d, _, _ := unstructured.NestedMap(o.Object, "data")
		return d
	}
	if d := data(); d["replicas"] != "2" || d["image"] != "a" {
		t.Fatalf("created with %v", d)
	}
	// An autoscaler sets replicas, someone else the image.
	withManager(t, store, key, func(o map[string]any) {
		_ = unstructured.SetNestedField(o, "5", "data", "replicas")
		_ = unstructured.SetNestedField(o, "b", "data", "image")
	}, []string{"autoscaler"}, map[string]any{"f:data": map[string]any{"f:replicas": map[string]any{}}})
	tg := c.Targets()[0]
	if _, err := tg.RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if d := data(); d["replicas"] != "5" || d["image"] != "a" {
		t.Fatalf("after a restore: %v, want replicas 5 (handed off) and image a (restored)", d)
	}
	// The output changes: replicas stay the autoscaler's.
	pod2 := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "c"}})
	if err := c.Handle(ctx, pod, pod2); err != nil {
		t.Fatal(err)
	}
	if d := data(); d["replicas"] != "5" || d["image"] != "c" {
		t.Fatalf("after an output change: %v", d)
	}
	if n := tg.LiveReads(); n != 0 {
		t.Errorf("%d live reads: the store's objects carry their managedFields", n)
	}
	if len(tg.Contested()) != 0 {
		t.Errorf("contested: %v", tg.Contested())
	}
}

// TestExternalFieldsSharedOwner: a field that the target's own field
// manager still owns beside another is not handed off.
func TestExternalFieldsSharedOwner(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	c := policyController(t, `externalFields: [data.replicas]`, StoreClient{Store: store})
	key := object.Key{Namespace: "ns", Name: "p"}
	if err := c.Handle(ctx, nil, obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})); err != nil {
		t.Fatal(err)
	}
	owns := map[string]any{"f:data": map[string]any{"f:replicas": map[string]any{}}}
	withManager(t, store, key, func(o map[string]any) { _ = unstructured.SetNestedField(o, "7", "data", "replicas") }, []string{FieldManager("test"), "other"}, owns)
	if _, err := c.Targets()[0].RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	o, _ := store.Get(cmGVK, key)
	if r, _, _ := unstructured.NestedString(o.Object, "data", "replicas"); r != "2" {
		t.Fatalf("replicas %q, want 2 restored", r)
	}
}

// TestDeletionPolicyOrphanOffline: with deletionPolicy Orphan, an
// Updater's object whose output goes stays, without the owner and
// managed-metadata annotations; Orphan does the same for every object
// the target marked (the Operator deleted).
func TestDeletionPolicyOrphanOffline(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	c := policyController(t, `deletionPolicy: Orphan`, StoreClient{Store: store})
	pods := []*unstructured.Unstructured{
		obj(podGVK, "ns", "a", map[string]any{"spec": map[string]any{"image": "x"}}),
		obj(podGVK, "ns", "b", map[string]any{"spec": map[string]any{"image": "y"}}),
	}
	for _, p := range pods {
		if err := c.Handle(ctx, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string) {
		t.Helper()
		o, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a := o.GetAnnotations(); a[opv1a1.OwnerAnnotation] != "" || a[ManagedMetadataAnnotation] != "" {
			t.Errorf("%s keeps marks %v", name, a)
		}
		if d, _, _ := unstructured.NestedString(o.Object, "data", "image"); d == "" {
			t.Errorf("%s lost its content", name)
		}
	}
	if err := c.Handle(ctx, pods[0], nil); err != nil {
		t.Fatal(err)
	}
	check("a")
	if err := c.Targets()[0].Orphan(ctx); err != nil {
		t.Fatal(err)
	}
	check("b")
}

// TestAdoptionOffline: adoption Adopt creates nothing and reports the
// missing object as a failed write, then writes it once it exists;
// adoption Create refuses an existing unmarked object with an owner
// conflict and leaves it alone.
func TestAdoptionOffline(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	key := object.Key{Namespace: "ns", Name: "p"}
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})
	adopt := policyController(t, `adoption: Adopt`, StoreClient{Store: store})
	if err := adopt.Handle(ctx, nil, pod); !errors.Is(err, ErrAdoptTargetMissing) {
		t.Fatalf("Adopt of a missing object: %v", err)
	}
	if _, err := store.Get(cmGVK, key); err == nil {
		t.Fatal("Adopt created the object")
	}
	if adopt.Pending() != 1 || !strings.Contains(adopt.Errors()[0].Message, "spec.controllers[0].target: ConfigMap ns/p: not found: a target with adoption Adopt does not create objects") {
		t.Fatalf("pending %d, errors %v", adopt.Pending(), adopt.Errors())
	}
	if _, err := store.Create(obj(cmGVK, "ns", "p", nil)); err != nil {
		t.Fatal(err)
	}
	if n, err := adopt.RetryFailed(ctx); n != 0 || err != nil {
		t.Fatalf("retry: %d %v", n, err)
	}
	if o, _ := store.Get(cmGVK, key); o.GetAnnotations()[opv1a1.OwnerAnnotation] != "test/copy" {
		t.Fatalf("adopted object %v", o.Object)
	}

	store = view.NewStore()
	if _, err := store.Create(obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"mine": "yes"}})); err != nil {
		t.Fatal(err)
	}
	create := policyController(t, `adoption: Create`, StoreClient{Store: store})
	if err := create.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	msg := create.Targets()[0].ConflictMessage()
	if want := "ConfigMap ns/p exists and carries no dcontroller.io/owner annotation; with adoption Create the controller writes only objects it created"; msg != want {
		t.Fatalf("conflict %q, want %q", msg, want)
	}
	if o, _ := store.Get(cmGVK, key); o.GetAnnotations()[opv1a1.OwnerAnnotation] != "" {
		t.Fatalf("Create took over %v", o.Object)
	}
}
