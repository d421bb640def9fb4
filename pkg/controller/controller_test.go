package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

var (
	podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	cmGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

func spec(t testing.TB, y string) opv1a1.Controller {
	t.Helper()
	var c opv1a1.Controller
	b, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func obj(gvk schema.GroupVersionKind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// countingClient counts the writes that reach the store.
type countingClient struct {
	StoreClient
	writes int
}

func (c *countingClient) Create(ctx context.Context, o *unstructured.Unstructured) error {
	c.writes++
	return c.StoreClient.Create(ctx, o)
}
func (c *countingClient) Update(ctx context.Context, o *unstructured.Unstructured) error {
	c.writes++
	return c.StoreClient.Update(ctx, o)
}
func (c *countingClient) Patch(ctx context.Context, g schema.GroupVersionKind, k object.Key, p []byte) error {
	c.writes++
	return c.StoreClient.Patch(ctx, g, k, p)
}
func (c *countingClient) Delete(ctx context.Context, g schema.GroupVersionKind, k object.Key) error {
	c.writes++
	return c.StoreClient.Delete(ctx, g, k)
}

func newController(t *testing.T, y string) (*Controller, *view.Store, *countingClient) {
	t.Helper()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	c, err := New(spec(t, y), Options{Operator: "test", Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return c, store, client
}

const updaterSpec = `
name: cm-per-pod
sources: [{apiGroup: "", version: v1, kind: Pod, labelSelector: {matchLabels: {app: web}}}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {from: pod}}
    data: {image: "$.spec.image"}
target: {apiGroup: "", version: v1, kind: ConfigMap}
`

func TestUpdaterLifecycle(t *testing.T) {
	ctx := context.Background()
	c, store, client := newController(t, updaterSpec)
	key := object.Key{Namespace: "ns", Name: "p"}
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})
	pod.SetLabels(map[string]string{"app": "web"})
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	cm, err := store.Get(cmGVK, key)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Object["data"].(map[string]any)["image"] != "a" || cm.GetAnnotations()[opv1a1.OwnerAnnotation] != "test/cm-per-pod" {
		t.Fatalf("created %v", cm.Object)
	}
	// A label added by someone else survives an update (labels are merged).
	cm.SetLabels(map[string]string{"from": "pod", "extra": "kept"})
	if _, err := store.Update(cm); err != nil {
		t.Fatal(err)
	}
	// The same state again: no write.
	before := client.writes
	if err := c.Handle(ctx, pod, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if client.writes != before {
		t.Errorf("an unchanged source caused %d writes", client.writes-before)
	}
	// An update of the source updates the target.
	pod2 := pod.DeepCopy()
	pod2.Object["spec"] = map[string]any{"image": "b"}
	if err := c.Handle(ctx, pod, pod2); err != nil {
		t.Fatal(err)
	}
	cm, _ = store.Get(cmGVK, key)
	if cm.Object["data"].(map[string]any)["image"] != "b" || cm.GetLabels()["extra"] != "kept" {
		t.Fatalf("updated %v", cm.Object)
	}
	// Leaving the label selector removes the output: the ConfigMap is deleted.
	pod3 := pod2.DeepCopy()
	pod3.SetLabels(map[string]string{"app": "other"})
	if err := c.Handle(ctx, pod2, pod3); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(cmGVK, key); err == nil {
		t.Fatal("ConfigMap not deleted when its source left the selector")
	}
	if got := c.Counters(); got.Writes != 3 || got.Deltas != 3 {
		t.Errorf("counters %+v", got)
	}
}

func TestUpdaterDoesNotDeleteForeignObjects(t *testing.T) {
	ctx := context.Background()
	c, store, _ := newController(t, updaterSpec)
	// A ConfigMap that existed before, without the owner annotation.
	if _, err := store.Create(obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"mine": "yes"}})); err != nil {
		t.Fatal(err)
	}
	// Resync only deletes stale objects carrying this controller's mark.
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"}); err != nil {
		t.Fatal("Resync deleted an object the controller did not write")
	}
	// A stale object with the mark is deleted by Resync.
	stale := obj(cmGVK, "ns", "stale", nil)
	stale.SetAnnotations(map[string]string{opv1a1.OwnerAnnotation: "test/cm-per-pod"})
	if _, err := store.Create(stale); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "stale"}); err == nil {
		t.Fatal("Resync kept a stale object this controller wrote")
	}
}

const patcherSpec = `
name: annotate
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: "$.metadata.name"
      namespace: "$.metadata.namespace"
      annotations:
        "n": {"@string": {"@len": "$.spec.containers"}}
        "first": "$.spec.containers[0].name"
target: {apiGroup: "", version: v1, kind: Pod, type: Patcher}
`

func TestPatcherSetsAndRemovesOnlyItsFields(t *testing.T) {
	ctx := context.Background()
	c, store, client := newController(t, patcherSpec)
	key := object.Key{Namespace: "ns", Name: "p"}
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "a"}}}})
	pod.SetAnnotations(map[string]string{"user": "keep"})
	created, err := store.Create(pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, nil, created); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Get(podGVK, key)
	if a := got.GetAnnotations(); a["n"] != "1" || a["first"] != "a" || a["user"] != "keep" {
		t.Fatalf("annotations after patch: %v", a)
	}
	// The patch's own write comes back as an event: no further write.
	writes := client.writes
	if err := c.Handle(ctx, created, got); err != nil {
		t.Fatal(err)
	}
	if client.writes != writes {
		t.Errorf("the controller's own write caused another write")
	}
	// The output drops "first" (no containers): that field is nulled, "n" updated.
	empty := got.DeepCopy()
	empty.Object["spec"] = map[string]any{"containers": []any{}}
	if err := c.Handle(ctx, got, empty); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Get(podGVK, key)
	if a := got.GetAnnotations(); a["n"] != "0" || a["user"] != "keep" {
		t.Fatalf("annotations after update: %v", a)
	} else if _, ok := a["first"]; ok {
		t.Fatalf("a field the output no longer sets was kept: %v", a)
	}
	// The source goes away: the fields the Patcher set are removed, the rest kept.
	if err := c.Handle(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Get(podGVK, key)
	if a := got.GetAnnotations(); len(a) != 1 || a["user"] != "keep" {
		t.Fatalf("annotations after removal: %v", a)
	}
}

func TestPatcherMissingTargetIsRetried(t *testing.T) {
	ctx := context.Background()
	c, store, _ := newController(t, patcherSpec)
	pod := obj(podGVK, "ns", "ghost", map[string]any{"spec": map[string]any{"containers": []any{}}})
	err := c.Handle(ctx, nil, pod)
	if err == nil || !strings.Contains(err.Error(), "spec.controllers[0].target: Pod ns/ghost: not found: a Patcher target does not create objects") {
		t.Fatalf("error %v", err)
	}
	if c.Pending() != 1 || len(c.Errors()) != 1 {
		t.Fatalf("pending %d errors %v", c.Pending(), c.Errors())
	}
	if _, err := store.Create(pod); err != nil {
		t.Fatal(err)
	}
	if n, err := c.RetryFailed(ctx); n != 0 || err != nil {
		t.Fatalf("retry: %d pending, %v", n, err)
	}
	got, _ := store.Get(podGVK, object.Key{Namespace: "ns", Name: "ghost"})
	if got.GetAnnotations()["n"] != "0" {
		t.Errorf("retry did not patch: %v", got.Object)
	}
}

func TestPredicateFiltersUpdates(t *testing.T) {
	ctx := context.Background()
	c, store, _ := newController(t, `
name: gen
sources: [{apiGroup: "", version: v1, kind: Pod, predicate: GenerationChanged}]
pipeline: {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, data: {l: "$.metadata.labels.x"}}}
target: {kind: Copy}
`)
	p1 := obj(podGVK, "ns", "p", nil)
	p1.SetGeneration(1)
	p1.SetLabels(map[string]string{"x": "1"})
	if err := c.Handle(ctx, nil, p1); err != nil {
		t.Fatal(err)
	}
	p2 := p1.DeepCopy()
	p2.SetLabels(map[string]string{"x": "2"})
	if err := c.Handle(ctx, p1, p2); err != nil {
		t.Fatal(err)
	}
	copyGVK := opv1a1.ViewGroupVersion("test").WithKind("Copy")
	got, err := store.Get(copyGVK, object.Key{Namespace: "ns", Name: "p"})
	if err != nil || got.Object["data"].(map[string]any)["l"] != "1" {
		t.Fatalf("a label-only change passed GenerationChanged: %v %v", got, err)
	}
	p3 := p2.DeepCopy()
	p3.SetGeneration(2)
	if err := c.Handle(ctx, p2, p3); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Get(copyGVK, object.Key{Namespace: "ns", Name: "p"})
	if got.Object["data"].(map[string]any)["l"] != "2" {
		t.Fatalf("a generation change did not pass: %v", got.Object)
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{`{name: c, sources: [], pipeline: {"@select": true}, target: {kind: X}}`, "spec.controllers[0].sources: at least one source is required"},
		{`{name: c, sources: [{kind: A}, {kind: A}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[1].kind: two sources of kind "A"`},
		{`{name: c, sources: [{kind: A, type: Sometimes}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].type: unknown source type "Sometimes"`},
		{`{name: c, sources: [{kind: A, predicate: Often}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].predicate: unknown predicate "Often"`},
		{`{name: c, sources: [{kind: A, type: Periodic, parameters: {period: soon}}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].parameters.period`},
		{`{name: c, sources: [{kind: A, labelSelector: {matchExpressions: [{key: a, operator: Nope}]}}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].labelSelector`},
		{`{name: c, sources: [{kind: A}], pipeline: {"@select": true}, target: {kind: X, type: Writer}}`, `spec.controllers[0].target.type: unknown target type "Writer"`},
		{`{name: c, sources: [{kind: A}], target: {kind: X}}`, `spec.controllers[0].pipeline: a pipeline is required`},
		{`{name: c, sources: [{apiGroup: apps, kind: Deployment}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].version: no version given`},
		{`{name: c, sources: [{kind: A, version: v2}], pipeline: {"@select": true}, target: {kind: X}}`, `spec.controllers[0].sources[0].version: views are served at v1alpha1 only`},
	} {
		var c opv1a1.Controller
		b, _ := yaml.YAMLToJSON([]byte(tc.spec))
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		if c.Pipeline.Raw == nil && strings.Contains(tc.spec, "pipeline") {
			c.Pipeline = apiextensionsv1.JSON{Raw: []byte(`{"@select": true}`)}
		}
		_, err := New(c, Options{Operator: "op", Client: StoreClient{Store: view.NewStore()}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n error %v\n want %q", tc.spec, err, tc.want)
		}
	}
}

// A Patcher that sets a field to the value it already had does not own it:
// when its output goes away, the field stays.
func TestPatcherLeavesFieldsItDidNotChange(t *testing.T) {
	ctx := context.Background()
	c, store, _ := newController(t, `
name: copy-label
sources: [{apiGroup: "", version: v1, kind: ConfigMap}]
pipeline:
  - "@select": {"@exists": "$.metadata.annotations.team"}
  - "@project":
      metadata:
        name: "$.metadata.name"
        namespace: "$.metadata.namespace"
        labels: {team: "$.metadata.annotations.team"}
target: {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
`)
	cm := obj(cmGVK, "ns", "c", nil)
	cm.SetLabels(map[string]string{"team": "blue"})
	cm.SetAnnotations(map[string]string{"team": "blue"})
	created, err := store.Create(cm)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, nil, created); err != nil {
		t.Fatal(err)
	}
	// The annotation goes away: the output disappears, but the user's label stays.
	cur, _ := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "c"})
	noAnn := cur.DeepCopy()
	noAnn.SetAnnotations(nil)
	if _, err := store.Update(noAnn); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, cur, noAnn); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "c"})
	if got.GetLabels()["team"] != "blue" {
		t.Fatalf("the Patcher removed a label it never changed: %v", got.GetLabels())
	}
	// A value the Patcher did change is removed with its output.
	red := got.DeepCopy()
	red.SetAnnotations(map[string]string{"team": "red"})
	if _, err := store.Update(red); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, got, red); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Get(cmGVK, object.Key{Namespace: "ns", Name: "c"})
	if got.GetLabels()["team"] != "red" {
		t.Fatalf("label %v", got.GetLabels())
	}
	plain := got.DeepCopy()
	plain.SetAnnotations(nil)
	if _, err := store.Update(plain); err != nil {
		t.Fatal(err)
	}
	if err := c.Handle(ctx, got, plain); err != nil {
		t.Fatal(err)
	}
	got, _ = store.Get(cmGVK, object.Key{Namespace: "ns", Name: "c"})
	if _, ok := got.GetLabels()["team"]; ok {
		t.Fatalf("a label the Patcher set was kept: %v", got.GetLabels())
	}
}

// HandleBatch keeps the source objects it is given as they are (callers
// pass the objects of an informer cache), while the pipeline does not see
// their managedFields.
func TestHandleBatchDoesNotModifySources(t *testing.T) {
	ctx := context.Background()
	c, store, _ := newController(t, `
name: fields
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
    data: {managed: {"@string": "$.metadata.managedFields"}, image: "$.spec.image"}
target: {apiGroup: "", version: v1, kind: ConfigMap}
`)
	pod := obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"image": "a"}})
	pod.Object["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "kubectl"}}
	before := pod.DeepCopy()
	if err := c.Handle(ctx, nil, pod); err != nil {
		t.Fatal(err)
	}
	next := pod.DeepCopy()
	next.Object["spec"] = map[string]any{"image": "b"}
	nextBefore := next.DeepCopy()
	if err := c.Handle(ctx, pod, next); err != nil {
		t.Fatal(err)
	}
	if !object.Equal(pod.Object, before.Object) || !object.Equal(next.Object, nextBefore.Object) {
		t.Fatalf("HandleBatch modified its source objects:\n%v\n%v", pod.Object, next.Object)
	}
	cm, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	data := cm.Object["data"].(map[string]any)
	if data["image"] != "b" || data["managed"] != nil && data["managed"] != "" {
		t.Fatalf("pipeline output %v: want image b and no managedFields", data)
	}
}
