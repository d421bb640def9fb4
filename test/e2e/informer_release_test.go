package e2e

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// informerProbeOperator is an Operator named name whose one controller
// watches InformerProbes and writes a view.
func informerProbeOperator(name string) string {
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  controllers:
    - name: probes
      sources: [{apiGroup: e2e.dcontroller.io, version: v1, kind: InformerProbe}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
      target: {kind: ProbeCopy}
`, name)
}

// gcWatches waits until the garbage collector of the suite's
// kube-controller-manager watches resource (a plural name), which it does
// for every kind from its first discovery after the kind is installed (it
// discovers every 30 seconds), and returns how many watches of resource the
// API server then serves: the watches that are not the test manager's.
func gcWatches(t *testing.T, resource string) int {
	t.Helper()
	eventually(t, 75*time.Second, func() string {
		if serverWatches(t, resource) == 0 {
			return "the garbage collector does not watch " + resource
		}
		return ""
	})
	return serverWatches(t, resource)
}

// TestInformersFollowRunningControllers: the manager watches a kind only
// while a running controller watches it. Two Operators and a
// CompositeController share one watch of InformerProbes (counted by the
// API server); it stays while any of them runs and ends when the last one
// is deleted, so the manager no longer holds the kind's objects. (The
// garbage collector's own watch of the kind is counted apart.)
func TestInformersFollowRunningControllers(t *testing.T) {
	installCRD(t, "InformerProbe", "informerprobes", "Namespaced")
	mustKubectl(t, "", "create", "namespace", "e2e-informers")
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: InformerProbe
metadata: {name: p1, namespace: e2e-informers}
`, "apply", "-f", "-")
	others := gcWatches(t, "informerprobes")
	watches := func(want int) func() string {
		return func() string {
			if got := serverWatches(t, "informerprobes") - others; got != want {
				return fmt.Sprintf("the API server serves %d watches of informerprobes besides the garbage collector's %d, want %d", got, others, want)
			}
			return ""
		}
	}
	rt := startManagerRuntime(t)
	// A failure leaves no controller of InformerProbes for other tests'
	// managers (which may not be allowed to watch them).
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "informers-cc", "--ignore-not-found", "--wait=false")
		for _, op := range []string{"informers-a", "informers-b", "informers-c"} {
			_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", op, "--ignore-not-found", "--wait=false")
		}
	})

	mustKubectl(t, informerProbeOperator("informers-a"), "apply", "-f", "-")
	mustKubectl(t, informerProbeOperator("informers-b"), "apply", "-f", "-")
	for _, op := range []string{"informers-a", "informers-b"} {
		eventually(t, 30*time.Second, func() string {
			if got := readyConditions(t, op); got != "probes=True/Ready" {
				return op + ": " + got
			}
			return ""
		})
	}
	eventually(t, 10*time.Second, watches(1))

	// A CompositeController whose parents are InformerProbes shares the
	// watch.
	hook := newHookServer(t, func(map[string]any) any { return map[string]any{"status": map[string]any{}} })
	ccYAML := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: informers-cc}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: informerprobes}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks: {sync: {webhook: {url: %s}}}
`, hook.URL)
	mustKubectl(t, ccYAML, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if hook.calls.Load() == 0 {
			return "the CompositeController has not called its hook"
		}
		return ""
	})
	if msg := watches(1)(); msg != "" {
		t.Fatal(msg)
	}

	// Deleting one holder keeps the watch for the others.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "informers-a")
	mustKubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "informers-cc")
	time.Sleep(2 * time.Second) // the stops have run
	if msg := watches(1)(); msg != "" {
		t.Fatal(msg + " while Operator informers-b runs")
	}
	if got := readyConditions(t, "informers-b"); got != "probes=True/Ready" {
		t.Fatalf("informers-b: %s", got)
	}
	// informers-b still sees changes through the shared watch.
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: InformerProbe
metadata: {name: p2, namespace: e2e-informers}
`, "apply", "-f", "-")
	eventually(t, 10*time.Second, func() string {
		var names []string
		for _, o := range rt.Views().List(opv1a1.ViewGroupVersion("informers-b").WithKind("ProbeCopy")) {
			names = append(names, o.GetName())
		}
		slices.Sort(names)
		if got := strings.Join(names, ","); got != "p1,p2" {
			return "informers-b's view holds " + got + ", want p1,p2"
		}
		return ""
	})

	// The last holder gone, the watch ends.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "informers-b")
	eventually(t, 10*time.Second, watches(0))

	// A new holder starts a new watch.
	mustKubectl(t, informerProbeOperator("informers-c"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got := readyConditions(t, "informers-c"); got != "probes=True/Ready" {
			return "informers-c: " + got
		}
		return ""
	})
	eventually(t, 10*time.Second, watches(1))

	// A new generation of the only Operator watching the kind keeps the
	// watch: the new controllers take the informer over without a new list.
	reqs := serverRequests(t, "informerprobes")
	mustKubectl(t, strings.Replace(informerProbeOperator("informers-c"),
		`metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}`,
		`metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {gen: "2"}}`, 1), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		objs := rt.Views().List(opv1a1.ViewGroupVersion("informers-c").WithKind("ProbeCopy"))
		if len(objs) != 2 {
			return fmt.Sprintf("informers-c's view holds %d objects, want 2", len(objs))
		}
		for _, o := range objs {
			if o.GetLabels()["gen"] != "2" {
				return "view object " + o.GetName() + " of informers-c is not from its second generation"
			}
		}
		return ""
	})
	if got := requestsSince(reqs, serverRequests(t, "informerprobes"), 1); got != "" {
		t.Fatalf("a new generation of informers-c sent %s (list and watch requests of its kind)", got)
	}
	if msg := watches(1)(); msg != "" {
		t.Fatal(msg)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "informers-c")
	eventually(t, 10*time.Second, watches(0))

	// The same for a CompositeController restarted by a change of its
	// annotations.
	calls := hook.calls.Load()
	mustKubectl(t, ccYAML, "apply", "-f", "-")
	eventually(t, 30*time.Second, watches(1))
	eventually(t, 30*time.Second, func() string {
		if hook.calls.Load() == calls {
			return "the recreated CompositeController has not called its hook"
		}
		return ""
	})
	reqs = serverRequests(t, "informerprobes")
	calls = hook.calls.Load()
	mustKubectl(t, "", "annotate", "compositecontrollers.metacontroller.k8s.io", "informers-cc", "e2e.dcontroller.io/restart=1")
	eventually(t, 30*time.Second, func() string {
		if hook.calls.Load() == calls {
			return "the restarted CompositeController has not called its hook"
		}
		return ""
	})
	if got := requestsSince(reqs, serverRequests(t, "informerprobes"), 1); got != "" {
		t.Fatalf("a restart of informers-cc sent %s (list and watch requests of its parent kind)", got)
	}
	mustKubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "informers-cc")
	eventually(t, 10*time.Second, watches(0))
}

// heapAfterGC returns the process's live heap in bytes after a collection.
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestReleasedInformersFreeTheirObjects: once the last controller that
// watches a kind is deleted, the manager (here in the test's process)
// frees the objects its informer held: less than a fifth of the heap they
// took stays.
func TestReleasedInformersFreeTheirObjects(t *testing.T) {
	const objects, size = 300, 50 << 10 // 15 MiB of data
	installCRD(t, "HeavyProbe", "heavyprobes", "Namespaced")
	mustKubectl(t, "", "create", "namespace", "e2e-heavy")
	ctx := context.Background()
	for i := 0; i < objects; i++ {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.dcontroller.io/v1", "kind": "HeavyProbe",
			"metadata": map[string]any{"name": fmt.Sprintf("h%d", i), "namespace": "e2e-heavy"},
			"data":     strings.Repeat(string(rune('a'+i%26)), size),
		}}
		if err := k8sClient.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	others := gcWatches(t, "heavyprobes")
	// The heap measured is the process's: the manager must run no
	// controller but the test's own.
	eventually(t, 30*time.Second, func() string {
		var left []string
		for _, r := range []string{"operators.dcontroller.io", "compositecontrollers.metacontroller.k8s.io", "decoratorcontrollers.metacontroller.k8s.io"} {
			out, err := kubectl(t, "", "get", r, "-o", "name")
			if err != nil {
				return err.Error()
			}
			left = append(left, strings.Fields(out)...)
		}
		if len(left) > 0 {
			return fmt.Sprintf("earlier tests left %s: the test's manager would run them and the heap it measures would hold their informers and views "+
				"(a test deletes the controllers it creates, e.g. deleteOperatorsAtCleanup)", strings.Join(left, ", "))
		}
		return ""
	})
	startManager(t)
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "heavy", "--ignore-not-found", "--wait=false")
	})
	before := heapAfterGC()
	mustKubectl(t, strings.NewReplacer("InformerProbe", "HeavyProbe", "ProbeCopy", "HeavyCopy").Replace(informerProbeOperator("heavy")), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		if got := readyConditions(t, "heavy"); got != "probes=True/Ready" {
			return "heavy: " + got
		}
		return ""
	})
	held := heapAfterGC() - before
	if held < objects*size*8/10 {
		t.Fatalf("the heap grew by %d bytes while the informer holds %d objects of %d bytes", held, objects, size)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "heavy")
	eventually(t, 10*time.Second, func() string {
		if n := serverWatches(t, "heavyprobes") - others; n != 0 {
			return fmt.Sprintf("%d watches of heavyprobes besides the garbage collector's %d", n, others)
		}
		return ""
	})
	var left int64
	eventually(t, 20*time.Second, func() string {
		if left = heapAfterGC() - before; left > held/5 {
			return fmt.Sprintf("the heap is still %d bytes above its size before the Operator (%d while it ran)", left, held)
		}
		return ""
	})
	t.Logf("the heap grew by %d bytes while the informer ran and is %d bytes above its size before", held, left)
}
