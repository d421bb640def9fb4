package controller

import (
	"context"
	"math"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

func ratioWidget(name string, ratio any) *unstructured.Unstructured {
	return obj(widgetGVK, "ns", name, map[string]any{"spec": map[string]any{"ratio": ratio}})
}

// ratioOf returns status.ratio of the Ratio view object name, or an error.
func ratioOf(t *testing.T, c *Controller, name string) (any, error) {
	t.Helper()
	o, err := c.opts.Client.Get(context.Background(), opv1a1.ViewGroupVersion("test").WithKind("Ratio"), object.Key{Namespace: "ns", Name: name})
	if err != nil {
		return nil, err
	}
	return o.Object["status"].(map[string]any)["ratio"], nil
}

// One source object whose @float is NaN: its output is refused with the
// expression's path, the other object of the same batch is written, and
// the view holds nothing JSON cannot carry.
func TestNaNFromExpressionRefused(t *testing.T) {
	ctx := context.Background()
	const y = `
name: ratios
sources: [{apiGroup: example.com, version: v1, kind: Widget}]
pipeline:
  "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, status: {ratio: {"@float": "$.spec.ratio"}}}
target: {kind: Ratio}
`
	c, store := newLimited(t, y, Options{})
	err := c.HandleBatch(ctx, []Change{{New: ratioWidget("bad", "NaN")}, {New: ratioWidget("good", "0.5")}})
	want := `spec.controllers[0].pipeline["@project"].status.ratio["@float"]: @float: cannot convert "NaN" to float: not a finite number`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("HandleBatch = %v, want an error containing %q", err, want)
	}
	if r, err := ratioOf(t, c, "good"); err != nil || r != 0.5 {
		t.Fatalf("good: ratio %v, %v; want 0.5", r, err)
	}
	if _, err := ratioOf(t, c, "bad"); !apierrors.IsNotFound(err) {
		t.Fatalf("bad: %v, want NotFound", err)
	}
	if perr := c.PipelineError(); perr == nil || !strings.Contains(perr.Error(), want) {
		t.Fatalf("PipelineError = %v", perr)
	}
	if n := len(store.List(opv1a1.ViewGroupVersion("test").WithKind("Ratio"))); n != 1 {
		t.Fatalf("%d Ratio objects, want 1", n)
	}
}

// A NaN or ±Inf that reaches an output without an operator making it (a
// source object from a Go caller: JSON has none) is refused where the
// output is written: the error names the pipeline, the object and the
// field; the other objects are written, the refused one keeps its last
// state until its output changes, and no write is retried for it.
func TestNonFiniteOutputRefused(t *testing.T) {
	ctx := context.Background()
	for _, target := range []string{"Updater", "Patcher"} {
		t.Run(target, func(t *testing.T) {
			y := `
name: ratios
sources: [{apiGroup: example.com, version: v1, kind: Widget}]
pipeline:
  "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, status: {ratio: "$.spec.ratio"}}
target: {kind: Ratio, type: ` + target + `}
`
			c, store := newLimited(t, y, Options{})
			if target == "Patcher" {
				for _, n := range []string{"good", "bad"} {
					if _, err := store.Create(obj(opv1a1.ViewGroupVersion("test").WithKind("Ratio"), "ns", n, nil)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.Handle(ctx, nil, ratioWidget("bad", 0.25)); err != nil {
				t.Fatal(err)
			}
			err := c.HandleBatch(ctx, []Change{{Old: ratioWidget("bad", 0.25), New: ratioWidget("bad", math.NaN())}, {New: ratioWidget("good", 0.5)}})
			want := "spec.controllers[0].pipeline: output Ratio ns/bad is not written: status.ratio: Invalid value: NaN: not a valid JSON number"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("HandleBatch = %v, want an error containing %q", err, want)
			}
			if r, err := ratioOf(t, c, "good"); err != nil || r != 0.5 {
				t.Fatalf("good: ratio %v, %v; want 0.5", r, err)
			}
			if r, err := ratioOf(t, c, "bad"); err != nil || r != 0.25 {
				t.Fatalf("bad: ratio %v, %v; want its last state 0.25", r, err)
			}
			if perr := c.PipelineError(); perr == nil || !strings.Contains(perr.Error(), want) {
				t.Fatalf("PipelineError = %v", perr)
			}
			if errs := c.Errors(); len(errs) == 0 || !strings.Contains(errs[len(errs)-1].Message, want) {
				t.Fatalf("Errors = %v", errs)
			}
			if c.Pending() != 0 {
				t.Fatalf("pending %d, want no retry", c.Pending())
			}
			if n, err := c.RetryFailed(ctx); n != 0 || err != nil {
				t.Fatalf("RetryFailed = %d, %v", n, err)
			}
			// +Inf is refused the same way; a finite value is written and
			// clears the error.
			err = c.Handle(ctx, ratioWidget("bad", math.NaN()), ratioWidget("bad", math.Inf(1)))
			if err == nil || !strings.Contains(err.Error(), "status.ratio: Invalid value: +Inf") {
				t.Fatalf("Handle(+Inf) = %v", err)
			}
			if err := c.Handle(ctx, ratioWidget("bad", math.Inf(1)), ratioWidget("bad", 0.75)); err != nil {
				t.Fatal(err)
			}
			if r, err := ratioOf(t, c, "bad"); err != nil || r != 0.75 {
				t.Fatalf("bad: ratio %v, %v; want 0.75", r, err)
			}
			if perr := c.PipelineError(); perr != nil {
				t.Fatalf("PipelineError = %v after the output became finite", perr)
			}
		})
	}
}
