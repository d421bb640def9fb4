package metacontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
)

func u(apiVersion, kind, ns, name, rv string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}}}
	if ns != "" {
		o.SetNamespace(ns)
	}
	o.SetResourceVersion(rv)
	return o
}

func TestExpectations(t *testing.T) {
	pk := parentKey{gvk: schema.GroupVersionKind{Version: "v1", Kind: "P"}}
	pk.Name = "p"
	a1, a2, b := u("v1", "ConfigMap", "ns", "a", "1"), u("v1", "ConfigMap", "ns", "a", "2"), u("v1", "ConfigMap", "ns", "b", "7")
	e := newExpectations()

	// No expectations: every event syncs.
	if e.observe(pk, a1, false) != changed {
		t.Fatal("an event without expectations must sync")
	}
	// Events that arrive while the sync runs are matched at finish.
	e.begin(pk)
	if e.observe(pk, a2, false) != ignore {
		t.Fatal("no sync while the sync runs")
	}
	resync, waiting := e.finish(pk, map[objRef]string{refOf(a2): "2", refOf(b): deletedRV}, true)
	if resync || !waiting || !e.pending(pk) {
		t.Fatalf("b's deletion is still awaited: resync=%v waiting=%v", resync, waiting)
	}
	if e.observe(pk, b, true) != settled {
		t.Fatal("the last awaited event must trigger the follow-up")
	}
	if e.pending(pk) {
		t.Fatal("expectations met")
	}

	// Without a follow-up, meeting the expectations syncs nothing...
	e.begin(pk)
	resync, _ = e.finish(pk, map[objRef]string{refOf(a2): "3"}, false)
	if resync {
		t.Fatal("nothing observed yet")
	}
	a3 := u("v1", "ConfigMap", "ns", "a", "3")
	if e.observe(pk, a3, false) != ignore {
		t.Fatal("own write without follow-up must not sync")
	}
	// ...unless something else happened meanwhile, or a sync was skipped.
	e.begin(pk)
	_, _ = e.finish(pk, map[objRef]string{refOf(a2): "4"}, false)
	if !e.pending(pk) {
		t.Fatal("want pending")
	}
	if e.observe(pk, u("v1", "ConfigMap", "ns", "a", "4"), false) != settled {
		t.Fatal("a sync skipped while waiting must happen when the wait ends")
	}
	// Everything already observed at finish: follow-up right away.
	e.begin(pk)
	e.observe(pk, u("v1", "ConfigMap", "ns", "a", "5"), false)
	if resync, waiting := e.finish(pk, map[objRef]string{refOf(a2): "5"}, true); !resync || waiting {
		t.Fatalf("resync=%v waiting=%v", resync, waiting)
	}
}

func TestParseDesired(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	ns := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	rules := map[schema.GroupVersionKind]*childRule{
		cm: {resource: resource{gvk: cm, namespaced: true}},
		ns: {resource: resource{gvk: ns}},
	}
	parent := u("e2e/v1", "P", "home", "p", "1")
	for _, tc := range []struct {
		items      string
		namespaced bool
		err        string
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, true, ""},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"home"}}`, true, ""},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"other"}}`, true, `children[0].metadata.namespace: "other" differs from the parent's namespace "home"`},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, false, "children[0].metadata.namespace: required"},
		{`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`, true, "children[0]: Secret.v1 is not a declared child resource (spec.childResources declares: ConfigMap.v1, Namespace.v1)"},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, true, "children[0].metadata.name: required"},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":5}}`, true, "children[0].metadata.name: must be a string, not number"},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":["x"]}}`, true, "children[0].metadata.namespace: must be a string, not array"},
		{`{"kind":"ConfigMap","metadata":{"name":"a"}}`, true, "children[0]: apiVersion and kind are required"},
		{`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`, true, "children[0]: a namespaced parent cannot own the cluster-scoped Namespace"},
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, true, "children[1]: duplicate ConfigMap home/a"},
	} {
		var items []map[string]any
		if err := decodeJSON("["+tc.items+"]", &items); err != nil {
			t.Fatal(err)
		}
		p := parent
		if !tc.namespaced {
			p = u("e2e/v1", "P", "", "p", "1")
		}
		set, err := parseDesired(p, tc.namespaced, rules, items, "children")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.items, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.items, err, tc.err)
		case tc.err == "" && set.list()[0].GetNamespace() != "home":
			t.Errorf("%s: namespace not defaulted", tc.items)
		}
	}
}

func TestPassesChecks(t *testing.T) {
	child := u("v1", "Pod", "ns", "p", "1")
	child.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Up"},
		map[string]any{"type": "Synced", "status": "False"},
	}}
	for _, tc := range []struct {
		checks []mcv1a1.StatusConditionCheck
		want   bool
	}{
		{nil, true},
		{[]mcv1a1.StatusConditionCheck{{Type: "Ready"}}, true},
		{[]mcv1a1.StatusConditionCheck{{Type: "Ready", Status: ptr.To("True")}}, true},
		{[]mcv1a1.StatusConditionCheck{{Type: "Ready", Status: ptr.To("True"), Reason: ptr.To("Up")}}, true},
		{[]mcv1a1.StatusConditionCheck{{Type: "Ready", Reason: ptr.To("Down")}}, false},
		{[]mcv1a1.StatusConditionCheck{{Type: "Synced", Status: ptr.To("True")}}, false},
		{[]mcv1a1.StatusConditionCheck{{Type: "Ready"}, {Type: "Missing"}}, false},
	} {
		if got := passesChecks(child, tc.checks); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.checks, got, tc.want)
		}
	}
}

func TestRevisionHelpers(t *testing.T) {
	parent := u("e2e/v1", "P", "ns", "p", "1")
	parent.Object["spec"] = map[string]any{"replicas": int64(3), "template": map[string]any{"v": "2"}}
	patch := parentPatch(parent, []string{"spec.template", "spec.missing"})
	if !equalJSON(patch, map[string]any{"spec": map[string]any{"template": map[string]any{"v": "2"}}}) {
		t.Fatalf("patch %v", patch)
	}
	old := atRevision(parent, []string{"spec.template"}, map[string]any{"spec": map[string]any{"template": map[string]any{"v": "1"}}})
	if v, _, _ := unstructured.NestedString(old.Object, "spec", "template", "v"); v != "1" {
		t.Errorf("old revision template %v", old.Object["spec"])
	}
	if r, _, _ := unstructured.NestedInt64(old.Object, "spec", "replicas"); r != 3 {
		t.Error("fields outside the revision paths must stay")
	}
	if v, _, _ := unstructured.NestedString(parent.Object, "spec", "template", "v"); v != "2" {
		t.Error("atRevision modified the parent")
	}

	rev := u("metacontroller.k8s.io/v1alpha1", "ControllerRevision", "ns", "r", "1")
	rev.Object["children"] = []any{map[string]any{"apiGroup": "", "kind": "Pod", "names": []any{"b", "a"}}}
	r := parseRevision(rev)
	a := childID{schema.GroupKind{Kind: "Pod"}, "a"}
	if !r.has(a) || r.dirty {
		t.Fatal("parse")
	}
	r.remove(a)
	r.add(childID{schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "s"})
	out := r.render()
	if !equalJSON(out.Object["children"], []any{
		map[string]any{"apiGroup": "", "kind": "Pod", "names": []any{"b"}},
		map[string]any{"apiGroup": "apps", "kind": "StatefulSet", "names": []any{"s"}},
	}) || !r.dirty {
		t.Errorf("render %v", out.Object["children"])
	}
}

func TestFingerprint(t *testing.T) {
	a, b := u("v1", "ConfigMap", "ns", "a", "1"), u("v1", "ConfigMap", "ns", "b", "1")
	f1 := fingerprint("x", []*unstructured.Unstructured{a, b})
	if f2 := fingerprint("x", []*unstructured.Unstructured{b}, []*unstructured.Unstructured{a}); f1 != f2 {
		t.Error("the fingerprint depends on order")
	}
	if fingerprint("y", []*unstructured.Unstructured{a, b}) == f1 {
		t.Error("flags ignored")
	}
	b2 := u("v1", "ConfigMap", "ns", "b", "2")
	if fingerprint("x", []*unstructured.Unstructured{a, b2}) == f1 {
		t.Error("resourceVersion ignored")
	}
}

func decodeJSON(s string, out any) error { return json.Unmarshal([]byte(s), out) }

func equalJSON(a, b any) bool { return apply.Equal(a, b) }

func TestObjectIndex(t *testing.T) {
	x := newObjectIndex(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	a := u("v1", "ConfigMap", "ns1", "a", "1")
	b := u("v1", "ConfigMap", "ns2", "b", "1")
	x.set(a)
	x.set(b)
	if len(x.orphanList("ns1", false)) != 1 || len(x.orphanList("", true)) != 2 {
		t.Fatal("orphans")
	}
	owned := a.DeepCopy()
	owned.SetResourceVersion("2")
	setControllerRef(owned, u("e2e/v1", "P", "ns1", "p", "1"))
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "e2e/v1", Kind: "P", Name: "p", UID: "uid-p", Controller: ptr.To(true)}})
	x.set(owned)
	if len(x.orphanList("ns1", false)) != 0 || len(x.owned("uid-p")) != 1 || x.get(keyOf(a)).GetResourceVersion() != "2" {
		t.Fatal("adoption not indexed")
	}
	x.remove(owned)
	if len(x.owned("uid-p")) != 0 || x.get(keyOf(a)) != nil || len(x.list("", true)) != 1 || len(x.list("ns2", false)) != 1 {
		t.Fatal("removal not indexed")
	}
}

// TestReleaseAfterLoad: the free pages of the initial syncs are released
// once the queue is empty, no sync runs or called the hook for loadIdle and
// none awaits the events of its writes, with the objects of the
// controller's watches, once.
func TestReleaseAfterLoad(t *testing.T) {
	e := newEngine(deps{log: logr.Discard()}, "compositecontroller/x")
	e.loadIdle = 20 * time.Millisecond
	released := make(chan int, 2)
	e.afterLoad = func(n int, _ logr.Logger) bool { released <- n; return true }
	synced := make(chan struct{})
	e.sync = func(ctx context.Context, pk parentKey) error {
		<-synced
		// A new observed state: the hook would be called.
		if _, skip := e.upToDate(pk, "fp", nil); skip {
			t.Error("the first sync of a parent skipped")
		}
		return nil
	}
	w := &watch{index: newObjectIndex(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})}
	for i := range 1500 {
		w.index.set(u("v1", "ConfigMap", "ns", fmt.Sprintf("c%d", i), "1"))
	}
	e.watches = []*watch{w}
	e.lastCall.Store(time.Now().UnixNano())
	e.queue.Add(parentKey{gvk: schema.GroupVersionKind{Group: "e2e", Version: "v1", Kind: "P"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.releaseAfterLoad(ctx)
	}()
	notYet := func(what string) {
		time.Sleep(10 * e.loadIdle)
		select {
		case n := <-released:
			t.Fatalf("released (%d objects) %s", n, what)
		default:
		}
	}
	notYet("while the queue holds a parent")
	worked := make(chan bool)
	go func() { worked <- e.work(ctx) }()
	notYet("while a sync runs")
	// The sync's writes are awaited.
	pk := parentKey{gvk: schema.GroupVersionKind{Group: "e2e", Version: "v1", Kind: "P"}, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}}
	child := u("v1", "ConfigMap", "ns", "c0", "2")
	e.exp.begin(pk)
	e.exp.finish(pk, map[objRef]string{refOf(child): "2"}, false)
	close(synced)
	if !<-worked {
		t.Fatal("the worker saw the queue shut down")
	}
	notYet("while a sync awaits the events of its writes")
	e.exp.observe(pk, child, false)
	<-done
	if n := <-released; n != 1500 {
		t.Fatalf("released with %d objects, want 1500", n)
	}
	select {
	case n := <-released:
		t.Fatalf("released a second time (%d objects)", n)
	default:
	}
}

func TestResultStatus(t *testing.T) {
	parent := u("e2e/v1", "P", "ns", "p", "1")
	parent.SetGeneration(3)
	refused := []error{errors.New(`ConfigMap "x" is invalid: data[bad key]: Invalid value`)}

	// A refused write: the hook's status plus Synced=False ChildWriteFailed.
	got := resultStatus(parent, map[string]any{"ok": true}, refused)
	c := syncedCondition(got)
	if got["ok"] != true || c == nil || c["status"] != "False" || c["reason"] != ReasonChildWriteFailed ||
		!strings.Contains(c["message"].(string), "bad key") || c["observedGeneration"] != int64(3) {
		t.Fatalf("refused write: %v", got)
	}
	// Repeated: the same condition, lastTransitionTime kept, so no write.
	parent.Object["status"] = got
	c["lastTransitionTime"] = "2020-01-01T00:00:00Z"
	again := resultStatus(parent, map[string]any{"ok": true}, refused)
	if !apply.Equal(again, got) {
		t.Errorf("a repeated failure changes the status:\n%v\n%v", again, got)
	}
	// Without a hook status the current status is the base; other
	// conditions are kept.
	parent.Object["status"] = map[string]any{"n": int64(1), "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	got = resultStatus(parent, nil, refused)
	if got["n"] != int64(1) || len(got["conditions"].([]any)) != 2 {
		t.Errorf("nil hook status: %v", got)
	}
	// Success after a failure with a hook that sets no status: the stale
	// condition is removed; nothing to do when there is none.
	parent.Object["status"] = got
	cleared := resultStatus(parent, nil, nil)
	if syncedCondition(cleared) != nil || len(cleared["conditions"].([]any)) != 1 {
		t.Errorf("cleared: %v", cleared)
	}
	parent.Object["status"] = cleared
	if s := resultStatus(parent, nil, nil); s != nil {
		t.Errorf("no failure, no hook status: want nil (leave alone), got %v", s)
	}
	// Success with a hook status: the hook's status as it is.
	if s := resultStatus(parent, map[string]any{"ok": true}, nil); len(s) != 1 || s["ok"] != true {
		t.Errorf("hook status: %v", s)
	}
}

func TestFollowUpAnnotation(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want bool
		err  bool
	}{
		{nil, true, false},
		{map[string]string{SyncAfterWritesAnnotation: "false"}, false, false},
		{map[string]string{SyncAfterWritesAnnotation: "true"}, true, false},
		{map[string]string{SyncAfterWritesAnnotation: "no"}, true, true},
	} {
		o := &metav1.ObjectMeta{Annotations: tc.ann}
		got, err := followUpOf(o)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%v: got %v, %v", tc.ann, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), `metadata.annotations["dcontroller.io/sync-after-writes"]`) {
			t.Errorf("error without the path: %v", err)
		}
	}
}

func TestUnsettledDelay(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, 0}, {maxQuickFollowUps, 0},
		{maxQuickFollowUps + 1, time.Second}, {maxQuickFollowUps + 2, 2 * time.Second}, {maxQuickFollowUps + 4, 8 * time.Second},
		{maxQuickFollowUps + 8, 2 * time.Minute}, // 128s, capped
		{1 << 30, 2 * time.Minute},
	} {
		if got := unsettledDelay(tc.n); got != tc.want {
			t.Errorf("unsettledDelay(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

// TestSettleFollowUp: every write of an answer counts in the loop guard; a
// streak beyond maxQuickFollowUps gets delayed follow-ups and one Event,
// a sync that writes nothing or moves a rollout on ends it.
func TestSettleFollowUp(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	e := newEngine(deps{recorder: rec, log: logr.Discard()}, "compositecontroller/x")
	defer e.queue.ShutDown()
	parent := u("e2e.dcontroller.io/v1", "Widget", "ns", "p", "5")
	pk := parentKey{gvk: parent.GroupVersionKind(), NamespacedName: keyOf(parent)}
	child := writes{refOf(u("v1", "ConfigMap", "ns", "p-0", "6")): "7"}
	status := writes{refOf(parent): "8"}
	rev := writes{refOf(u("v1", "ConfigMap", "ns", "p-0", "6")): "9", refOf(u(controllerRevisionGVK.GroupVersion().String(), "ControllerRevision", "ns", "r", "3")): "10"}
	eventsSeen := func() int {
		n := 0
		for {
			select {
			case ev := <-rec.Events:
				if !strings.Contains(ev, EventStatusNotSettling) {
					t.Errorf("unexpected event %q", ev)
				}
				n++
			default:
				return n
			}
		}
	}
	step := func(w writes, failed bool) (bool, time.Duration) {
		return e.settleFollowUp(pk, parent, w, len(w) > 0, failed)
	}

	// A hook that settles after some rounds: never delayed, no Event, and
	// its next streak starts from zero.
	for round := 0; round < 2; round++ {
		for i := 0; i < maxQuickFollowUps; i++ {
			w := child
			if i%2 == 1 {
				w = status
			}
			if now, after := step(w, false); !now || after != 0 {
				t.Fatalf("round %d, sync %d: now=%v after=%s, want an immediate follow-up", round, i+1, now, after)
			}
		}
		if now, after := step(writes{}, false); now || after != 0 {
			t.Fatalf("a sync without writes: now=%v after=%s", now, after)
		}
	}
	// Beyond maxQuickFollowUps: delayed, 1s then 2s, one Event.
	for i := 0; i < maxQuickFollowUps; i++ {
		step(child, false)
	}
	if now, after := step(child, false); now || after != time.Second {
		t.Errorf("sync %d: now=%v after=%s, want a follow-up after 1s", maxQuickFollowUps+1, now, after)
	}
	if now, after := step(status, false); now || after != 2*time.Second {
		t.Errorf("sync %d: now=%v after=%s, want a follow-up after 2s", maxQuickFollowUps+2, now, after)
	}
	// A failed sync is retried with the failure backoff, not delayed too.
	if now, after := step(child, true); now || after != 0 {
		t.Errorf("failed sync: now=%v after=%s, want neither", now, after)
	}
	if n := eventsSeen(); n != 1 {
		t.Errorf("%d StatusNotSettling events, want 1", n)
	}
	// Rollout progress ends the streak.
	if now, _ := step(rev, false); !now {
		t.Error("a ControllerRevision write is not followed up at once")
	}
	if now, after := step(child, false); !now || after != 0 {
		t.Errorf("after rollout progress: now=%v after=%s, want an immediate follow-up", now, after)
	}
	if n := eventsSeen(); n != 0 {
		t.Errorf("%d more events", n)
	}
}

// TestStartErrorReasons: the Ready reason of a start error says what
// happens next, as for Operators: KindNotFound and StartFailed are
// retried, InvalidSpec waits for the spec to change.
func TestStartErrorReasons(t *testing.T) {
	noMatch := &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Group: "e2e.dcontroller.io", Version: "v1", Resource: "bundles"}}
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "e2e.dcontroller.io", Resource: "bundles"}, "")
	for _, tc := range []struct {
		name  string
		err   error
		want  string
		retry bool
	}{
		{"running", nil, ReasonRunning, false},
		{"spec error", errors.New("spec.hooks: a sync or a finalize hook is required"), ReasonInvalidSpec, false},
		{"resource unknown to discovery", discoveryFailed(fmt.Errorf("spec.parentResource: %w", noMatch)), ReasonKindNotFound, true},
		{"resource answering 404", discoveryFailed(notFound), ReasonKindNotFound, true},
		{"discovery failed", discoveryFailed(errors.New("unable to retrieve the complete list of server APIs")), ReasonStartFailed, true},
		{"informer never synced", startFailed(errors.New("timed out")), ReasonStartFailed, true},
		{"kind no longer served, wrapped", fmt.Errorf("x: %w", kindNotFound(notFound)), ReasonKindNotFound, true},
	} {
		if got := reasonOf(tc.err); got != tc.want {
			t.Errorf("%s: reason %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.err != nil && isRetryable(tc.err); got != tc.retry {
			t.Errorf("%s: retryable %v, want %v", tc.name, got, tc.retry)
		}
	}
}
