package operator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// sweepOperator is generation gen of operator "sweep": controllers is the
// YAML list of its spec.controllers.
func sweepOperator(t *testing.T, gen int64, controllers string) *opv1a1.Operator {
	t.Helper()
	op := decodeOperator(t, "apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {name: sweep}\nspec:\n  controllers:\n"+controllers)
	op.Generation = gen
	return op
}

const sweepAll = `    - name: sizes
      sources: [{kind: Widget}]
      pipeline:
        "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, size: "$.size"}
      target: {kind: SizeView}
`

const sweepLarge = `    - name: sizes
      sources: [{kind: Widget}]
      pipeline:
        - "@select": {"@gt": ["$.size", 1000]}
        - "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, size: "$.size"}
      target: {kind: SizeView}
`

// viewNames returns the names of the view objects of kind in operator
// sweep's group, sorted and comma-separated.
func viewNames(rt *Runtime, kind string) string {
	var names []string
	for _, o := range rt.Views().List(opv1a1.ViewGroupVersion("sweep").WithKind(kind)) {
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func waitViews(t *testing.T, rt *Runtime, kind, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for viewNames(rt, kind) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", kind, viewNames(rt, kind), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func keyOf(u *unstructured.Unstructured) object.Key {
	return object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}
}

func putWidget(t *testing.T, rt *Runtime, name string, size int64) {
	t.Helper()
	gvk := opv1a1.ViewGroupVersion("sweep").WithKind("Widget")
	u := &unstructured.Unstructured{Object: map[string]any{"size": size}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace("default")
	u.SetName(name)
	if cur, err := rt.Views().Get(gvk, keyOf(u)); err == nil {
		u.SetResourceVersion(cur.GetResourceVersion())
		if _, err := rt.Views().Update(u); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := rt.Views().Create(u); err != nil {
		t.Fatal(err)
	}
}

// A new generation of an operator leaves its views as a fresh start of
// that generation would compute them: objects the previous generation's
// Updaters wrote and the new one does not write are deleted (a narrower
// @select, a controller writing another kind, a controller removed), what
// both write stays, and view objects no controller wrote stay.
func TestNewGenerationSweepsItsViews(t *testing.T) {
	rt := NewRuntime(RuntimeOptions{Logger: logr.Discard()})
	defer rt.Stop()
	ctx := context.Background()
	putWidget(t, rt, "w1", 10)
	putWidget(t, rt, "w2", 2000)
	// An object of the target kind that no controller wrote (a user's).
	own := &unstructured.Unstructured{Object: map[string]any{"size": int64(1)}}
	own.SetGroupVersionKind(opv1a1.ViewGroupVersion("sweep").WithKind("SizeView"))
	own.SetNamespace("default")
	own.SetName("users")
	if _, err := rt.Views().Create(own); err != nil {
		t.Fatal(err)
	}

	rt.Upsert(ctx, sweepOperator(t, 1, sweepAll))
	waitViews(t, rt, "SizeView", "users,w1,w2")

	// Narrower: w1 goes, w2 stays (the same object, not rewritten).
	w2, err := rt.Views().Get(opv1a1.ViewGroupVersion("sweep").WithKind("SizeView"), object.Key{Namespace: "default", Name: "w2"})
	if err != nil {
		t.Fatal(err)
	}
	rt.Upsert(ctx, sweepOperator(t, 2, sweepLarge))
	waitViews(t, rt, "SizeView", "users,w2")
	w2now, err := rt.Views().Get(w2.GroupVersionKind(), keyOf(w2))
	if err != nil || w2now.GetResourceVersion() != w2.GetResourceVersion() {
		t.Fatalf("w2 was rewritten or dropped (%v): resourceVersion %s, was %s", err, w2now.GetResourceVersion(), w2.GetResourceVersion())
	}
	// The new generation follows its sources.
	putWidget(t, rt, "w1", 5000)
	waitViews(t, rt, "SizeView", "users,w1,w2")
	putWidget(t, rt, "w1", 5)
	waitViews(t, rt, "SizeView", "users,w2")

	// Another target kind: SizeView keeps only the user's object.
	rt.Upsert(ctx, sweepOperator(t, 3, strings.ReplaceAll(sweepAll, "SizeView", "OtherView")))
	waitViews(t, rt, "OtherView", "w1,w2")
	waitViews(t, rt, "SizeView", "users")

	// The controller removed: its objects go.
	rt.Upsert(ctx, sweepOperator(t, 4, `    - name: other
      sources: [{kind: Widget}]
      pipeline:
        "@project": {metadata: {name: "copy", namespace: "default"}}
      target: {kind: CopyView}
`))
	waitViews(t, rt, "CopyView", "copy")
	waitViews(t, rt, "OtherView", "")
	waitViews(t, rt, "SizeView", "users")
}

// While a controller that writes a view kind cannot start, or is invalid,
// the kind is not swept (its output is unknown): an invalid edit destroys
// nothing downstream, and the next generation that compiles sweeps.
func TestSweepWaitsForWritersThatStart(t *testing.T) {
	rt := NewRuntime(RuntimeOptions{Logger: logr.Discard()})
	defer rt.Stop()
	ctx := context.Background()
	putWidget(t, rt, "w1", 10)
	putWidget(t, rt, "w2", 2000)
	rt.Upsert(ctx, sweepOperator(t, 1, sweepAll))
	waitViews(t, rt, "SizeView", "w1,w2")
	invalid := strings.Replace(sweepAll, `"@project"`, `"@nosuchop"`, 1)
	rt.Upsert(ctx, sweepOperator(t, 2, invalid))
	st, _ := rt.Status("sweep", 2)
	if len(st.Controllers) != 1 || st.Controllers[0].Conditions[0].Reason != ReasonInvalidSpec {
		t.Fatalf("status of generation 2: %+v", st)
	}
	time.Sleep(100 * time.Millisecond)
	if got := viewNames(rt, "SizeView"); got != "w1,w2" {
		t.Fatalf("an invalid generation left SizeView with %q, want w1,w2", got)
	}
	rt.Upsert(ctx, sweepOperator(t, 3, sweepLarge))
	waitViews(t, rt, "SizeView", "w2")
}

// A generation replaced before its sweep passes the objects it was to
// sweep on to the next one.
func TestUnsweptViewsPassToTheNextGeneration(t *testing.T) {
	gvk := opv1a1.ViewGroupVersion("sweep").WithKind("SizeView")
	k := object.Key{Namespace: "default", Name: "w1"}
	cur := &running{staleViews: map[schema.GroupVersionKind]map[object.Key]bool{gvk: {k: true}}}
	got := writtenViews(cur)
	if !got[gvk][k] || len(got) != 1 || len(got[gvk]) != 1 {
		t.Fatalf("writtenViews of a generation with an unswept object: %v", got)
	}
	got[gvk][object.Key{Name: "x"}] = true
	if len(cur.staleViews[gvk]) != 1 {
		t.Fatal("writtenViews returned the replaced generation's own map")
	}
}
