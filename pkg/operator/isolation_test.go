package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// hangingCache is a cache whose informers never sync: GetInformer blocks
// until its context ends, as controller-runtime's does for a kind whose
// list keeps failing. What is under test is the Runtime's locking, not the
// informer. Every other method is nil (the operators of these tests touch
// the cache only through GetInformer).
type hangingCache struct {
	cache.Cache
	entered   chan schema.GroupVersionKind // one value per GetInformer call
	mu        sync.Mutex
	cancelled int // calls that returned because their context ended
}

func newHangingCache() *hangingCache {
	return &hangingCache{entered: make(chan schema.GroupVersionKind, 16)}
}

func (c *hangingCache) GetInformer(ctx context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	c.entered <- obj.GetObjectKind().GroupVersionKind()
	<-ctx.Done()
	c.mu.Lock()
	c.cancelled++
	c.mu.Unlock()
	return nil, ctx.Err()
}

func (c *hangingCache) cancelledCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelled
}

// stuckOperator has a view controller, which starts, and then a controller
// whose native source never syncs.
const stuckOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: stuck, generation: 1}
spec:
  controllers:
    - name: fine
      sources: [{kind: In}]
      pipeline: {"@project": {metadata: "$.metadata", spec: "$.spec"}}
      target: {kind: Out}
    - name: hangs
      sources: [{apiGroup: never.example.com, version: v1, kind: Widget}]
      pipeline: {"@project": {metadata: "$.metadata", spec: "$.spec"}}
      target: {kind: WidgetCopy}
`

// healthyOperator copies view In to view Out.
const healthyOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: healthy, generation: 1}
spec:
  controllers:
    - name: copy
      sources: [{kind: In}]
      pipeline: {"@project": {metadata: "$.metadata", spec: "$.spec"}}
      target: {kind: Out}
`

func decodeOperator(t *testing.T, y string) *opv1a1.Operator {
	t.Helper()
	ops, err := DecodeOperators(strings.NewReader(y))
	if err != nil || len(ops) != 1 {
		t.Fatalf("decoding operator: %v (%d operators)", err, len(ops))
	}
	return ops[0]
}

// within fails the test when fn does not return within d.
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// startHanging runs Upsert of op in the background and waits until its
// start waits for the informer of the never-syncing source. The returned
// channel receives Upsert's answer.
func startHanging(t *testing.T, rt *Runtime, c *hangingCache, op *opv1a1.Operator) <-chan bool {
	t.Helper()
	res := make(chan bool, 1)
	go func() { res <- rt.Upsert(context.Background(), op) }()
	select {
	case gvk := <-c.entered:
		if gvk.Kind != "Widget" {
			t.Fatalf("GetInformer of %s, want Widget", gvk)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the start never asked for the informer of the source")
	}
	return res
}

func readyReason(t *testing.T, rt *Runtime, op, ctrl string) (reason, message string) {
	t.Helper()
	st, ok := rt.Status(op, 1)
	if !ok {
		t.Fatalf("operator %s does not run", op)
	}
	for _, cs := range st.Controllers {
		if cs.Name == ctrl {
			return cs.Conditions[0].Reason, cs.Conditions[0].Message
		}
	}
	t.Fatalf("operator %s: no controller %s in %+v", op, ctrl, st)
	return "", ""
}

// While one operator's start waits for an informer that never syncs, the
// status of every operator answers at once (the waiting controller says
// Starting and what it waits for), another operator starts, runs and
// stops, and deleting the waiting operator cancels its wait.
func TestStartWaitDoesNotBlockOtherOperators(t *testing.T) {
	c := newHangingCache()
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	defer rt.Stop()
	stuck := startHanging(t, rt, c, decodeOperator(t, stuckOperator))

	// Status readers hammer the Runtime meanwhile (for -race).
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup
	for i := 0; i < 4; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stopReaders:
					return
				default:
				}
				rt.Status("stuck", 1)
				rt.Running("stuck")
				rt.Names()
				rt.ByNamespace("stuck")
			}
		}()
	}
	defer func() { close(stopReaders); readers.Wait() }()

	// The operator's other controller starts meanwhile (its controllers
	// start concurrently).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r, _ := readyReason(t, rt, "stuck", "fine"); r == ReasonReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the controller fine did not start while its sibling waits for an informer")
		}
	}
	within(t, 2*time.Second, "Status of the starting operator", func() {
		if r, m := readyReason(t, rt, "stuck", "hangs"); r != ReasonStarting || !strings.Contains(m, "sources[0]: waiting for the informer of never.example.com/v1, Kind=Widget to sync") {
			t.Errorf("hangs: reason %s (%s), want Starting and the informer it waits for", r, m)
		}
		if r, _ := readyReason(t, rt, "stuck", "fine"); r != ReasonReady {
			t.Errorf("fine: reason %s, want Ready", r)
		}
		runs, ok := rt.Running("stuck")
		if !ok || !runs["fine"] || runs["hangs"] {
			t.Errorf("Running(stuck) = %v %v, want fine only", runs, ok)
		}
		if names := rt.Names(); len(names) != 1 || names[0] != "stuck" {
			t.Errorf("Names() = %v", names)
		}
	})
	within(t, 2*time.Second, "an Upsert of the same generation", func() {
		if rt.Upsert(context.Background(), decodeOperator(t, stuckOperator)) {
			t.Error("Upsert of the generation being started restarted it")
		}
	})

	healthy := decodeOperator(t, healthyOperator)
	within(t, 2*time.Second, "the start of another operator", func() {
		if !rt.Upsert(context.Background(), healthy) {
			t.Error("Upsert(healthy) = false")
		}
	})
	in := &unstructured.Unstructured{}
	in.SetAPIVersion(opv1a1.ViewGroup("healthy") + "/v1alpha1")
	in.SetKind("In")
	in.SetNamespace("default")
	in.SetName("x")
	_ = unstructured.SetNestedField(in.Object, "v", "spec", "a")
	if _, err := rt.Views().Create(in); err != nil {
		t.Fatal(err)
	}
	outGVK := schema.GroupVersionKind{Group: opv1a1.ViewGroup("healthy"), Version: "v1alpha1", Kind: "Out"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := rt.Views().Get(outGVK, object.Key{Namespace: "default", Name: "x"}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the healthy operator did not write its target within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r, _ := readyReason(t, rt, "healthy", "copy"); r != ReasonReady {
		t.Errorf("healthy: reason %s, want Ready", r)
	}
	within(t, 2*time.Second, "the stop of another operator", func() { rt.Delete("healthy") })

	within(t, 2*time.Second, "Delete of the starting operator", func() { rt.Delete("stuck") })
	select {
	case started := <-stuck:
		if started {
			t.Error("Upsert(stuck) = true for a start that Delete cancelled")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Upsert(stuck) did not return after Delete")
	}
	if _, ok := rt.Status("stuck", 1); ok {
		t.Error("the deleted operator still runs")
	}
	if n := c.cancelledCalls(); n != 1 {
		t.Errorf("%d informer waits cancelled, want 1", n)
	}
	// Its views went with it.
	for _, gvk := range rt.Views().Kinds() {
		if gvk.Group == opv1a1.ViewGroup("stuck") && len(rt.Views().List(gvk)) > 0 {
			t.Errorf("view %s of the deleted operator kept its objects", gvk)
		}
	}
}

// Stop cancels a start under way and returns promptly.
func TestStopCancelsStart(t *testing.T) {
	c := newHangingCache()
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	stuck := startHanging(t, rt, c, decodeOperator(t, stuckOperator))
	within(t, 2*time.Second, "Stop", rt.Stop)
	select {
	case <-stuck:
	case <-time.After(2 * time.Second):
		t.Fatal("Upsert did not return after Stop")
	}
	if names := rt.Names(); len(names) != 0 {
		t.Errorf("Names() after Stop = %v", names)
	}
}

// An Upsert of a new generation cancels the start of the previous one
// instead of waiting for its informers, and runs the new generation.
func TestUpsertNewGenerationCancelsStart(t *testing.T) {
	c := newHangingCache()
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	defer rt.Stop()
	stuck := startHanging(t, rt, c, decodeOperator(t, stuckOperator))
	// Generation 2 drops the controller whose source never syncs.
	next := decodeOperator(t, strings.Replace(strings.Replace(healthyOperator, "name: healthy", "name: stuck", 1), "generation: 1", "generation: 2", 1))
	within(t, 2*time.Second, "Upsert of generation 2", func() {
		if !rt.Upsert(context.Background(), next) {
			t.Error("Upsert(generation 2) = false")
		}
	})
	select {
	case <-stuck:
	case <-time.After(2 * time.Second):
		t.Fatal("the Upsert of generation 1 did not return")
	}
	st, ok := rt.Status("stuck", 2)
	if !ok || len(st.Controllers) != 1 || st.Controllers[0].Name != "copy" || st.Controllers[0].Conditions[0].Reason != ReasonReady {
		t.Errorf("status of generation 2: %+v %v", st, ok)
	}
}

// A Delete that waits for the slot of an operator whose Upsert has not yet
// published it still stops what that Upsert starts: the start begins
// cancelled and the operator is gone once both return.
func TestDeleteRacingUpsert(t *testing.T) {
	for i := 0; i < 50; i++ {
		c := newHangingCache()
		rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
		op := decodeOperator(t, stuckOperator)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); rt.Upsert(context.Background(), op) }()
		go func() {
			defer wg.Done()
			// Until the Upsert is visible (published or holding the slot),
			// a Delete has nothing to stop.
			for {
				rt.mu.Lock()
				_, published := rt.operators["stuck"]
				busy := rt.slots["stuck"] != nil
				rt.mu.Unlock()
				if published || busy {
					break
				}
				time.Sleep(time.Millisecond)
			}
			rt.Delete("stuck")
		}()
		within(t, 5*time.Second, "Upsert and Delete", wg.Wait)
		if names := rt.Names(); len(names) != 0 {
			t.Fatalf("round %d: Names() = %v after Delete, want none", i, names)
		}
		rt.Stop()
	}
}

// Cancel ends a start under way without waiting for it; the operator stays
// listed until the next Upsert of its generation, which restarts it.
func TestCancelStart(t *testing.T) {
	c := newHangingCache()
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	defer rt.Stop()
	op := decodeOperator(t, stuckOperator)
	stuck := startHanging(t, rt, c, op)
	rt.Cancel("stuck", 2) // another generation: nothing happens
	select {
	case <-stuck:
		t.Fatal("Cancel of another generation ended the start")
	case <-time.After(100 * time.Millisecond):
	}
	within(t, 2*time.Second, "Cancel", func() { rt.Cancel("stuck", 1) })
	select {
	case <-stuck:
	case <-time.After(2 * time.Second):
		t.Fatal("Upsert did not return after Cancel")
	}
	if r, m := readyReason(t, rt, "stuck", "hangs"); r != ReasonStartFailed || !strings.Contains(m, "context canceled") {
		t.Errorf("hangs after Cancel: reason %s (%s), want StartFailed, context canceled", r, m)
	}
	// The next Upsert of the cancelled generation starts it again
	// (startHanging sees it wait for the informer once more).
	again := startHanging(t, rt, c, op)
	within(t, 2*time.Second, "Delete", func() { rt.Delete("stuck") })
	if <-again {
		t.Error("Upsert = true for a start that Delete cancelled")
	}
}

// Concurrent Upserts of several generations and Deletes of one operator
// take turns without deadlock, and none waits for the informers of a start
// that a later call replaces: once a final Delete is made, every call
// returns promptly and the operator is gone.
func TestConcurrentUpsertsAndDeletes(t *testing.T) {
	c := newHangingCache()
	go func() {
		for range c.entered {
		}
	}()
	defer close(c.entered)
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	defer rt.Stop()
	gens := []*opv1a1.Operator{decodeOperator(t, stuckOperator)}
	for g := 2; g <= 3; g++ {
		gens = append(gens, decodeOperator(t, strings.Replace(stuckOperator, "generation: 1", fmt.Sprintf("generation: %d", g), 1)))
	}
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if (i+j)%4 == 0 {
					rt.Delete("stuck")
				} else {
					rt.Upsert(context.Background(), gens[(i*5+j)%len(gens)])
				}
				rt.Status("stuck", 1)
			}
		}()
	}
	// The last calls may wait for the informer of the generation they
	// start; a final Delete cancels it.
	time.Sleep(200 * time.Millisecond)
	within(t, 5*time.Second, "the final Delete", func() { rt.Delete("stuck") })
	within(t, 5*time.Second, "the concurrent calls", func() {
		for {
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
				// A call made after the final Delete started it again.
				rt.Delete("stuck")
			}
		}
	})
	rt.Delete("stuck")
	if names := rt.Names(); len(names) != 0 {
		t.Errorf("Names() = %v after the final Delete", names)
	}
}
