package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestTargetsSpec: target: and targets: are two spellings of a
// controller's targets; both, neither, or two targets of one name are
// refused with the path of the mistake.
func TestTargetsSpec(t *testing.T) {
	const head = `{name: c, sources: [{kind: A}], pipeline: {"@select": true}, `
	for _, tc := range []struct{ spec, want string }{
		{head + `target: {kind: X}, targets: [{kind: W}]}`, `spec.controllers[0]: both target and targets are set; write one target as target: {...} or several as targets: [{...}, ...], not both`},
		{head + `}`, `spec.controllers[0]: no target; write target: {kind: ...} or targets: [{kind: ...}, ...]`},
		{head + `targets: []}`, `spec.controllers[0]: no target`},
		{head + `targets: [{kind: X}, {kind: X, type: Patcher}]}`, `spec.controllers[0].targets[1].name: target name "X" is also the name of targets[0] (a target's name defaults to its kind): give one of them another name`},
		{head + `targets: [{kind: X, name: W}, {kind: W}]}`, `spec.controllers[0].targets[1].name: target name "W" is also the name of targets[0]`},
		{head + `targets: [{kind: X}, {kind: Z, type: Writer}]}`, `spec.controllers[0].targets[1].type: unknown target type "Writer"`},
		{head + `targets: [{kind: X}, {kind: ""}]}`, `spec.controllers[0].targets[1].kind: must not be empty`},
		{head + `targets: [{kind: X}, {kind: Z}]}`, `spec.controllers[0].pipeline`},
		{head + `targets: [{kind: X}, {kind: Z}]}`, `a pipeline writing several targets (X, Z) must be in branch form`},
	} {
		var c opv1a1.Controller
		b, _ := yaml.YAMLToJSON([]byte(tc.spec))
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		_, err := New(c, Options{Operator: "op", Client: StoreClient{Store: view.NewStore()}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n error %v\n want %q", tc.spec, err, tc.want)
		}
	}
	// The one-item list is the target: form; the name defaults to the kind.
	c := mustNew(t, head+`targets: [{kind: X}]}`, Options{Operator: "op", Client: StoreClient{Store: view.NewStore()}})
	if ts := c.Targets(); len(ts) != 1 || ts[0].Name != "X" || ts[0].Path != "spec.controllers[0].targets[0]" || ts[0].Owner() != "op/c" {
		t.Errorf("targets %+v", ts)
	}
	c = mustNew(t, head+`targets: [{kind: X, name: x}]}`, Options{Operator: "op", Client: StoreClient{Store: view.NewStore()}})
	if ts := c.Targets(); ts[0].Name != "x" || ts[0].Owner() != "op/c/x" {
		t.Errorf("named target %+v", ts[0])
	}
}

// TestControllerOptionsAccepted: the successor's controller options are
// accepted, and each one set is logged with its path as having no effect.
func TestControllerOptionsAccepted(t *testing.T) {
	var logs []string
	log := funcr.New(func(prefix, args string) { logs = append(logs, args) }, funcr.Options{})
	y := `{name: c, sources: [{kind: A}], pipeline: {"@select": true}, targets: [{kind: X}], options: {disableIncrementalizer: true, disableDistincter: true}}`
	c := mustNew(t, y, Options{Operator: "op", Client: StoreClient{Store: view.NewStore()}, Logger: log})
	if c == nil {
		t.Fatal("no controller")
	}
	all := strings.Join(logs, "\n")
	for _, want := range []string{"spec.controllers[0].options.disableIncrementalizer", "spec.controllers[0].options.disableDistincter"} {
		if !strings.Contains(all, want) {
			t.Errorf("no log of %s in:\n%s", want, all)
		}
	}
	if strings.Contains(all, "disableReconciler") {
		t.Errorf("an option not set was logged:\n%s", all)
	}
}

// addTarget adds a target to c as New does for a spec's targets[j]: the
// pipeline then routes outputs named name to it.
func addTarget(t *testing.T, c *Controller, name string, gvk schema.GroupVersionKind, typ opv1a1.TargetType) *Target {
	t.Helper()
	tg, err := newTarget(c, name, gvk, typ, "spec.controllers[0].targets[1]")
	if err != nil {
		t.Fatal(err)
	}
	c.targets = append(c.targets, tg)
	return tg
}

func zset(weight int, docs ...map[string]any) *dbsp.ZSet {
	z := dbsp.NewZSet()
	for _, d := range docs {
		z.Insert(d, weight)
	}
	return z
}

var summaryGVK = schema.GroupVersionKind{Group: "test.view.dcontroller.io", Version: "v1alpha1", Kind: "Summary"}

// TestTwoTargetsOfDifferentKinds: outputs go to the target of their name;
// each target writes in its own way (an Updater of a view, a Patcher of a
// native kind), keeps its own record, counters and tracked keys, and an
// object of one target's kind with the key of the other's is not the
// other's.
func TestTwoTargetsOfDifferentKinds(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	c := mustNew(t, `{name: c, sources: [{kind: A}], pipeline: {"@select": true}, targets: [{kind: Summary}]}`,
		Options{Operator: "test", Client: client})
	sum := c.Targets()[0]
	cmt := addTarget(t, c, "ConfigMap", cmGVK, opv1a1.Patcher)
	if _, err := store.Create(obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"other": "x"}})); err != nil {
		t.Fatal(err)
	}
	summary := map[string]any{"apiVersion": summaryGVK.GroupVersion().String(), "kind": "Summary",
		"metadata": map[string]any{"namespace": "ns", "name": "p"}, "spec": map[string]any{"n": int64(1)}}
	patch := map[string]any{"metadata": map[string]any{"namespace": "ns", "name": "p"}, "data": map[string]any{"ours": "y"}}
	if errs := c.writeOutputs(ctx, map[string]*dbsp.ZSet{"Summary": zset(1, summary), "ConfigMap": zset(1, patch)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	key := object.Key{Namespace: "ns", Name: "p"}
	s, err := store.Get(summaryGVK, key)
	if err != nil || s.Object["spec"].(map[string]any)["n"] != int64(1) {
		t.Fatalf("summary %v, %v", s, err)
	}
	cm, err := store.Get(cmGVK, key)
	if err != nil || cm.Object["data"].(map[string]any)["ours"] != "y" || cm.Object["data"].(map[string]any)["other"] != "x" {
		t.Fatalf("configmap %v, %v", cm, err)
	}
	if _, ok := patchRecordOf(cm.Object, cmt.patchRecord); !ok {
		t.Errorf("no Patcher record on %v", cm.Object)
	}
	for _, tg := range []*Target{sum, cmt} {
		if got := tg.WrittenKeys(); !slices.Equal(got, []object.Key{key}) {
			t.Errorf("%s: written keys %v", tg.Name, got)
		}
		if !tg.Desires(key) {
			t.Errorf("%s: does not desire %s", tg.Name, key)
		}
		if n := tg.Counters(); n.Writes != 1 {
			t.Errorf("%s: counters %+v", tg.Name, n)
		}
	}
	if n := c.Counters(); n.Writes != 2 {
		t.Errorf("controller counters %+v, want the sum of the targets'", n)
	}
	if !sum.Tracks(s) || sum.Tracks(cm) || !cmt.Tracks(cm) || cmt.Tracks(s) {
		t.Errorf("Tracks: summary target %v/%v, configmap target %v/%v", sum.Tracks(s), sum.Tracks(cm), cmt.Tracks(cm), cmt.Tracks(s))
	}
	// A restore of the ConfigMap target re-applies its field only.
	cm.Object["data"] = map[string]any{"other": "x"}
	if _, err := store.Update(cm); err != nil {
		t.Fatal(err)
	}
	writes := client.writes
	if _, err := cmt.RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := sum.RestoreTarget(ctx, key); err != nil {
		t.Fatal(err)
	}
	if client.writes != writes+1 {
		t.Errorf("%d writes restoring one target object, want 1", client.writes-writes)
	}
	// Outputs that go away go from their own target only.
	if errs := c.writeOutputs(ctx, map[string]*dbsp.ZSet{"ConfigMap": zset(-1, patch)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	cm, _ = store.Get(cmGVK, key)
	if _, ok := cm.Object["data"].(map[string]any)["ours"]; ok {
		t.Errorf("the Patcher's field stayed: %v", cm.Object)
	}
	if _, err := store.Get(summaryGVK, key); err != nil {
		t.Errorf("the other target's object went: %v", err)
	}
	if sum.Desires(key) != true || cmt.Desires(key) {
		t.Errorf("desires after the removal: summary %v configmap %v", sum.Desires(key), cmt.Desires(key))
	}
}

// TestTwoTargetsOfOneKind: two Updater targets of one kind, told apart by
// name, own their objects apart (owner annotations test/c/a and test/c),
// so a Resync of one does not delete the other's objects, and an object
// the other owns is an owner conflict, not a takeover.
func TestTwoTargetsOfOneKind(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	c := mustNew(t, `{name: c, sources: [{kind: A}], pipeline: {"@select": true}, targets: [{name: a, apiGroup: "", version: v1, kind: ConfigMap}]}`,
		Options{Operator: "test", Client: client})
	a := c.Targets()[0]
	b := addTarget(t, c, "ConfigMap", cmGVK, opv1a1.Updater)
	if a.Owner() != "test/c/a" || b.Owner() != "test/c" {
		t.Fatalf("owners %q and %q", a.Owner(), b.Owner())
	}
	cmDoc := func(name, v string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "ns", "name": name}, "data": map[string]any{"v": v}}
	}
	x, y := object.Key{Namespace: "ns", Name: "x"}, object.Key{Namespace: "ns", Name: "y"}
	if errs := c.writeOutputs(ctx, map[string]*dbsp.ZSet{"a": zset(1, cmDoc("x", "a")), "ConfigMap": zset(1, cmDoc("y", "b"))}); len(errs) > 0 {
		t.Fatal(errs)
	}
	owner := func(k object.Key) string {
		o, err := store.Get(cmGVK, k)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return o.GetAnnotations()[opv1a1.OwnerAnnotation]
	}
	if owner(x) != "test/c/a" || owner(y) != "test/c" {
		t.Fatalf("owners: x %q, y %q", owner(x), owner(y))
	}
	ox, _ := store.Get(cmGVK, x)
	oy, _ := store.Get(cmGVK, y)
	if !a.Tracks(ox) || a.Tracks(oy) || !b.Tracks(oy) || b.Tracks(ox) {
		t.Errorf("Tracks: a %v/%v, b %v/%v", a.Tracks(ox), a.Tracks(oy), b.Tracks(oy), b.Tracks(ox))
	}
	// A restarted controller (nothing in memory) resyncs: neither target
	// deletes the other's object.
	c2 := mustNew(t, `{name: c, sources: [{kind: A}], pipeline: {"@select": true}, targets: [{name: a, apiGroup: "", version: v1, kind: ConfigMap}]}`,
		Options{Operator: "test", Client: client})
	a2 := c2.Targets()[0]
	b2 := addTarget(t, c2, "ConfigMap", cmGVK, opv1a1.Updater)
	if errs := c2.writeOutputs(ctx, map[string]*dbsp.ZSet{"a": zset(1, cmDoc("x", "a")), "ConfigMap": zset(1, cmDoc("y", "b"))}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c2.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if owner(x) != "test/c/a" || owner(y) != "test/c" {
		t.Fatalf("after a resync: x %q, y %q", owner(x), owner(y))
	}
	// Target b now also wants x, which a owns: b leaves it alone.
	if errs := c2.writeOutputs(ctx, map[string]*dbsp.ZSet{"ConfigMap": zset(1, cmDoc("x", "b"))}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if conf := b2.Conflicts(); len(conf) != 1 || conf[0].Key != x || conf[0].Owner != "test/c/a" {
		t.Errorf("conflicts of b: %v", conf)
	}
	if len(a2.Conflicts()) != 0 {
		t.Errorf("conflicts of a: %v", a2.Conflicts())
	}
	if o, _ := store.Get(cmGVK, x); o.Object["data"].(map[string]any)["v"] != "a" {
		t.Errorf("x was taken over: %v", o.Object)
	}
	// a's output for x goes: its object is deleted, and b may write it.
	if errs := c2.writeOutputs(ctx, map[string]*dbsp.ZSet{"a": zset(-1, cmDoc("x", "a"))}); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := b2.RestoreTarget(ctx, x); err != nil {
		t.Fatal(err)
	}
	if owner(x) != "test/c" {
		t.Errorf("x after a's output went: owner %q", owner(x))
	}
}

// TestBranchesWriteTwoTargets: a pipeline in branch form writes a view
// Updater target and a native Patcher target from one source change, and
// takes both back when the source goes.
func TestBranchesWriteTwoTargets(t *testing.T) {
	ctx := context.Background()
	store := view.NewStore()
	client := &countingClient{StoreClient: StoreClient{Store: store}}
	c := mustNew(t, `
name: c
sources: [{kind: A}]
targets:
  - {kind: Summary}
  - {apiGroup: "", version: v1, kind: ConfigMap, type: Patcher}
pipeline:
  - - "@inputs": [A]
    - "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, spec: {count: "$.spec.n"}}
    - "@output": Summary
  - - "@inputs": [A]
    - "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, data: {x: "$.spec.x"}}
    - "@output": ConfigMap
`, Options{Operator: "test", Client: client})
	if _, err := store.Create(obj(cmGVK, "ns", "p", map[string]any{"data": map[string]any{"other": "o"}})); err != nil {
		t.Fatal(err)
	}
	aGVK := schema.GroupVersionKind{Group: "test.view.dcontroller.io", Version: "v1alpha1", Kind: "A"}
	a := obj(aGVK, "ns", "p", map[string]any{"spec": map[string]any{"n": int64(3), "x": "y"}})
	if err := c.Handle(ctx, nil, a); err != nil {
		t.Fatal(err)
	}
	key := object.Key{Namespace: "ns", Name: "p"}
	s, err := store.Get(summaryGVK, key)
	if err != nil || s.Object["spec"].(map[string]any)["count"] != int64(3) {
		t.Fatalf("summary %v, %v", s, err)
	}
	cm, _ := store.Get(cmGVK, key)
	if d := cm.Object["data"].(map[string]any); d["x"] != "y" || d["other"] != "o" {
		t.Fatalf("configmap data %v", d)
	}
	if n := c.Counters(); n.Writes != 2 || n.Deltas != 1 {
		t.Errorf("counters %+v", n)
	}
	if err := c.Handle(ctx, a, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(summaryGVK, key); err == nil {
		t.Error("the summary stayed after its source went")
	}
	cm, _ = store.Get(cmGVK, key)
	if d := cm.Object["data"].(map[string]any); d["x"] != nil || d["other"] != "o" {
		t.Errorf("configmap data after the source went: %v", d)
	}
}
