package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
	"github.com/dcontroller/dcontroller/pkg/view"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// fanOutSpec makes spec.n² Items of each Widget.
const fanOutSpec = `
name: fan
sources: [{apiGroup: example.com, version: v1, kind: Widget}]
pipeline:
  - "@project": {metadata: "$.metadata", a: {"@range": "$.spec.n"}, b: {"@range": "$.spec.n"}}
  - "@unwind": "$.a"
  - "@unwind": "$.b"
  - "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, pair: ["$.a", "$.b"]}
target: {kind: Item}
`

func widget(name string, n int) *unstructured.Unstructured {
	return obj(widgetGVK, "ns", name, map[string]any{"spec": map[string]any{"n": int64(n)}})
}

func itemNames(store *view.Store) []string {
	var names []string
	for _, o := range store.List(opv1a1.ViewGroupVersion("test").WithKind("Item")) {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	return names
}

func newLimited(t *testing.T, y string, opts Options) (*Controller, *view.Store) {
	t.Helper()
	store := view.NewStore()
	opts.Operator, opts.Client = "test", StoreClient{Store: store}
	c, err := New(spec(t, y), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, store
}

// TestFanOutRefused: a change over MaxDeltaEntries is refused with an error
// naming the stage, the count and the object; the other changes of its
// batch go through, and the controller computes later changes on the last
// state it accepted, as a controller that never saw the refused change.
func TestFanOutRefused(t *testing.T) {
	ctx := context.Background()
	c, store := newLimited(t, fanOutSpec, Options{MaxDeltaEntries: 50})
	if err := c.HandleBatch(ctx, []Change{{New: widget("w1", 3)}, {New: widget("w2", 2)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(itemNames(store)); n != 13 {
		t.Fatalf("%d items, want 13", n)
	}
	err := c.HandleBatch(ctx, []Change{{New: widget("w1", 4)}, {New: widget("w2", 10)}, {New: widget("w3", 1)}})
	var le *pipeline.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("error %v, want a limit error", err)
	}
	want := `spec.controllers[0].pipeline[2]["@unwind"]: the change would make this stage emit 104 entries, over the limit of 50; ` +
		`the change of Widget ns/w2 is not applied`
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error\n got %v\nwant %s...", err, want)
	}
	if perr := c.PipelineError(); perr == nil || !strings.Contains(perr.Error(), "Widget ns/w2") {
		t.Fatalf("PipelineError %v", perr)
	}
	if errs := c.Errors(); len(errs) != 1 || !strings.HasPrefix(errs[0].Message, want) {
		t.Fatalf("Errors %v", errs)
	}
	// 104: the update removes the 4 entries of n=2 and adds 100.
	// w1 and w3 went through; w2 keeps its 2x2 items.
	if n := len(itemNames(store)); n != 16+4+1 {
		t.Fatalf("%d items, want 21", n)
	}
	// The next change of w2 applies against the state the controller
	// accepted (n=2), and the refusal is over.
	if err := c.HandleBatch(ctx, []Change{{New: widget("w2", 5)}}); err != nil {
		t.Fatal(err)
	}
	if perr := c.PipelineError(); perr != nil {
		t.Fatalf("PipelineError %v after the object changed", perr)
	}
	fresh, freshStore := newLimited(t, fanOutSpec, Options{})
	if err := fresh.HandleBatch(ctx, []Change{{New: widget("w1", 4)}, {New: widget("w2", 5)}, {New: widget("w3", 1)}}); err != nil {
		t.Fatal(err)
	}
	if got, want := itemNames(store), itemNames(freshStore); !slices.Equal(got, want) {
		t.Fatalf("items\n got %v\nwant %v", got, want)
	}
	// A deletion of a refused object removes what it had made.
	if err := c.HandleBatch(ctx, []Change{{New: widget("w1", 100)}}); !errors.As(err, &le) {
		t.Fatalf("error %v", err)
	}
	if err := c.HandleBatch(ctx, []Change{{Old: widget("w1", 100)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(itemNames(store)); n != 25+1 || c.PipelineError() != nil {
		t.Fatalf("%d items (want 26), %v", n, c.PipelineError())
	}
}

// TestFanOutDefault: the default bound refuses the fan-out of the issue,
// two lists of 1000 unwound (10⁶ entries), without building it.
func TestFanOutDefault(t *testing.T) {
	c, store := newLimited(t, fanOutSpec, Options{})
	err := c.Handle(context.Background(), nil, widget("w", 1000))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("emit 1000000 entries, over the limit of %d", DefaultMaxDeltaEntries)) {
		t.Fatalf("error %v", err)
	}
	if n := len(itemNames(store)); n != 0 {
		t.Fatalf("%d items written", n)
	}
}

func TestObjectSizeLimit(t *testing.T) {
	ctx := context.Background()
	const y = `
name: big
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, data: {blob: "$.spec.blob"}}
target: {apiGroup: "", version: v1, kind: ConfigMap}
`
	c, store := newLimited(t, y, Options{MaxObjectBytes: 1000})
	pod := func(n int) *unstructured.Unstructured {
		return obj(podGVK, "ns", "p", map[string]any{"spec": map[string]any{"blob": strings.Repeat("x", n)}})
	}
	err := c.Handle(ctx, nil, pod(2000))
	if apierrors.ReasonForError(err) != metav1.StatusReasonRequestEntityTooLarge {
		t.Fatalf("error %v, want RequestEntityTooLarge", err)
	}
	for _, s := range []string{"spec.controllers[0].target: ConfigMap ns/p", "is 2", "bytes encoded as JSON, over the limit of 1000 bytes", "not sent"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not say %q", err, s)
		}
	}
	if _, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"}); !apierrors.IsNotFound(err) {
		t.Fatalf("the object was written: %v", err)
	}
	if c.Pending() != 1 {
		t.Fatalf("pending %d", c.Pending())
	}
	if err := c.Handle(ctx, nil, pod(10)); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(cmGVK, object.Key{Namespace: "ns", Name: "p"}); err != nil || c.Pending() != 0 {
		t.Fatalf("not written after it shrank: %v, pending %d", err, c.Pending())
	}
	// Views are not bounded.
	v, vstore := newLimited(t, strings.Replace(y, `{apiGroup: "", version: v1, kind: ConfigMap}`, "{kind: Blob}", 1), Options{MaxObjectBytes: 1000})
	if err := v.Handle(ctx, nil, pod(2000)); err != nil {
		t.Fatal(err)
	}
	if n := len(vstore.List(opv1a1.ViewGroupVersion("test").WithKind("Blob"))); n != 1 {
		t.Fatalf("%d view objects", n)
	}
}

// jsonSizeBound is never below the length of the JSON encoding, escapes
// and the longest numbers included.
func TestJSONSizeBound(t *testing.T) {
	docs := []map[string]any{
		{},
		{"a": nil, "b": true, "c": int64(-9223372036854775808), "d": -1.2345678901234567e-300},
		{"s": "\x00\x01<>&\u2028\"\\", "l": []any{"", map[string]any{}, []any{}, false}},
		{"metadata": map[string]any{"name": "x", "labels": map[string]any{"app": "web"}}, "data": map[string]any{"k": "v"}},
	}
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := jsonSizeBound(d, 1<<20)
		if !ok || n < len(b) {
			t.Errorf("bound %d (ok %v) for %s of %d bytes", n, ok, b, len(b))
		}
		if _, ok := jsonSizeBound(d, len(b)-1); ok && len(b) > 2 {
			t.Errorf("bound within %d bytes for %s of %d bytes", len(b)-1, b, len(b))
		}
	}
	if _, ok := jsonSizeBound(map[string]any{"n": 3}, 1<<20); ok {
		t.Error("an int (not int64) has a bound")
	}
}
