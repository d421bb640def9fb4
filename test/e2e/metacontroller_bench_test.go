package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

const (
	benchParents  = 1000
	benchChildren = 3
	benchChanges  = 100
)

// benchKubectl runs kubectl for a benchmark.
func benchKubectl(b *testing.B, stdin string, args ...string) {
	b.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := combinedOutputBounded(cmd); err != nil {
		b.Fatalf("kubectl %v: %v: %s", args, err, out)
	}
}

// benchHook answers instantly with benchChildren ConfigMaps per parent and
// counts calls, per parent and for observed states already seen.
type benchHook struct {
	calls      atomic.Int64
	duplicates atomic.Int64
	mu         sync.Mutex
	seen       map[string]bool
}

func (h *benchHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.calls.Add(1)
	parent, _ := req["parent"].(map[string]any)
	// The observed state: parent and children by resourceVersion.
	state := []string{str(path(parent, "metadata.uid")) + "@" + str(path(parent, "metadata.resourceVersion"))}
	kids, _ := path(req, "children").(map[string]any)["ConfigMap.v1"].(map[string]any)
	for k, o := range kids {
		state = append(state, k+"@"+str(path(o.(map[string]any), "metadata.resourceVersion")))
	}
	sort.Strings(state)
	key := strings.Join(state, ",")
	h.mu.Lock()
	if h.seen[key] {
		h.duplicates.Add(1)
	}
	h.seen[key] = true
	h.mu.Unlock()
	name := str(path(parent, "metadata.name"))
	var children []any
	for i := 0; i < benchChildren; i++ {
		children = append(children, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, i)},
			"data":     map[string]any{"value": str(path(parent, "spec.value"))}})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"children": children, "status": map[string]any{"children": len(kids)}})
}

// quiet waits until the hook got no call for d.
func (h *benchHook) quiet(d time.Duration) { waitQuiet(&h.calls, d) }

// waitQuiet waits until a hook's call counter has not moved for d.
func waitQuiet(calls *atomic.Int64, d time.Duration) {
	last, since := calls.Load(), time.Now()
	for time.Since(since) < d {
		time.Sleep(100 * time.Millisecond)
		if n := calls.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

// BenchmarkMetacontrollerComposite1000 measures a CompositeController with
// 1,000 parents of 3 children each and an instant hook: the time from
// creating all parents to all 3,000 children present, the hook calls per
// parent for the initial sync, per parent change that leaves the desired
// children as they are (a label change: exactly one call), and per change
// that updates the children (one call, plus the follow-up that observes the
// updated children; with the follow-up turned off by the
// dcontroller.io/sync-after-writes annotation: one call), and the calls
// made for an observed state already sent (duplicates, target 0). Run with
// -benchtime=1x.
func BenchmarkMetacontrollerComposite1000(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runCompositeBenchmark(b, fmt.Sprintf("bench-mc-%d-%d", time.Now().Unix()%100000, i))
	}
}

func runCompositeBenchmark(b *testing.B, ns string) {
	ctx := context.Background()
	benchKubectl(b, crdYAML("BenchParent", "benchparents", "Namespaced"), "apply", "-f", "-")
	benchKubectl(b, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/benchparents.e2e.dcontroller.io")
	benchKubectl(b, "", "create", "namespace", ns)

	log := ctrl.Log.WithName("bench")
	mgr, rt, err := operator.NewManager(restConfig, operator.ManagerOptions{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := metacontroller.Setup(mctx, mgr, metacontroller.Options{Logger: log}); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(mctx)
		rt.Stop()
	}()
	defer func() {
		cancel()
		<-done
	}()

	h := &benchHook{seen: map[string]bool{}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cc := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: benchparents
    labelSelector: {matchLabels: {bench: %s}}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s}
`, ns, ns, srv.URL)
	benchKubectl(b, cc, "apply", "-f", "-")
	defer benchKubectl(b, "", "delete", "compositecontroller", ns)
	time.Sleep(time.Second) // the controller starts

	parent := func(i int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.dcontroller.io/v1", "kind": "BenchParent",
			"metadata": map[string]any{"name": fmt.Sprintf("p%04d", i), "namespace": ns, "labels": map[string]any{"bench": ns}},
			"spec":     map[string]any{"value": "v1"},
		}}
		return u
	}
	parallel := func(n int, fn func(i int) error) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					if err := fn(i); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	countChildren := func() int {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind("ConfigMapList")
		if err := k8sClient.List(ctx, l, client.InNamespace(ns), client.HasLabels{"controller-uid"}); err != nil {
			b.Fatal(err)
		}
		return len(l.Items)
	}

	b.ResetTimer()
	start := time.Now()
	parallel(benchParents, func(i int) error { return k8sClient.Create(ctx, parent(i)) })
	created := time.Since(start)
	for countChildren() < benchParents*benchChildren {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("only %d children after 10 minutes", countChildren())
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	h.quiet(3 * time.Second)
	initial := h.calls.Load()

	// callsPerChange patches benchChanges parents with p and returns the
	// hook calls per patched parent.
	callsPerChange := func(p string) float64 {
		c0 := h.calls.Load()
		parallel(benchChanges, func(i int) error {
			return k8sClient.Patch(ctx, parent(i), client.RawPatch(types.MergePatchType, []byte(p)))
		})
		h.quiet(3 * time.Second)
		return float64(h.calls.Load()-c0) / benchChanges
	}
	// A change that leaves the desired children as they are, then one that
	// updates every child of the parent.
	labelCalls := callsPerChange(`{"metadata":{"labels":{"touched":"yes"}}}`)
	specCalls := callsPerChange(`{"spec":{"value":"v2"}}`)

	// A restart sends every parent again (the last observed states are not
	// persisted): duplicates are counted up to here.
	duplicates := h.duplicates.Load()

	// The same changes with the follow-up sync turned off: one call per
	// change, also when it updates the children. Changing the annotation
	// restarts the controller, which syncs every parent once first.
	benchKubectl(b, "", "annotate", "compositecontroller", ns, metacontroller.SyncAfterWritesAnnotation+"=false")
	time.Sleep(time.Second)
	h.quiet(5 * time.Second)
	labelCallsNoFollow := callsPerChange(`{"metadata":{"labels":{"touched":"again"}}}`)
	specCallsNoFollow := callsPerChange(`{"spec":{"value":"v3"}}`)

	b.ReportMetric(elapsed.Seconds(), "s-to-all-children")
	b.ReportMetric(created.Seconds(), "s-to-create-parents")
	b.ReportMetric(float64(initial)/benchParents, "calls/parent-initial")
	b.ReportMetric(labelCalls, "calls/noop-change")
	b.ReportMetric(specCalls, "calls/child-change")
	b.ReportMetric(labelCallsNoFollow, "calls/noop-change-no-follow-up")
	b.ReportMetric(specCallsNoFollow, "calls/child-change-no-follow-up")
	b.ReportMetric(float64(duplicates), "duplicate-calls")
}

// strategyBenchParents is the parent count of
// BenchmarkMetacontrollerApplyStrategies.
const strategyBenchParents = 500

// strategyRun is what one apply strategy measured.
type strategyRun struct {
	converge    time.Duration // creating the parents to every child present
	initial     float64       // hook calls per parent until quiet
	childChange float64       // hook calls per parent change that updates its children
}

// BenchmarkMetacontrollerApplyStrategies runs 500 parents of 3 ConfigMap
// children each with an instant hook, once with --apply-strategy
// dynamic-apply and once with server-side-apply, and reports for each the
// time from creating the parents to all children present and the hook
// calls per parent (initial sync, and a change that updates every child of
// 100 parents). Server-side apply must cost the same hook calls per parent
// as the default (within 0.05 calls: the settle rule's follow-ups depend
// only on what the hook answers); it fails otherwise. Run with
// -benchtime=1x.
func BenchmarkMetacontrollerApplyStrategies(b *testing.B) {
	for i := 0; i < b.N; i++ {
		runs := map[metacontroller.ApplyStrategy]strategyRun{}
		for _, s := range []metacontroller.ApplyStrategy{metacontroller.DynamicApply, metacontroller.ServerSideApply} {
			ns := fmt.Sprintf("bench-as-%s-%d-%d", strings.SplitN(string(s), "-", 2)[0], time.Now().Unix()%100000, i)
			runs[s] = runStrategyBenchmark(b, ns, s)
		}
		for s, r := range runs {
			name := strings.SplitN(string(s), "-", 2)[0]
			b.ReportMetric(r.converge.Seconds(), "s-to-all-children-"+name)
			b.ReportMetric(r.initial, "calls/parent-initial-"+name)
			b.ReportMetric(r.childChange, "calls/child-change-"+name)
		}
		d, s := runs[metacontroller.DynamicApply], runs[metacontroller.ServerSideApply]
		if math.Abs(d.initial-s.initial) > 0.05 || math.Abs(d.childChange-s.childChange) > 0.05 {
			b.Errorf("hook calls per parent differ: dynamic-apply %.3f initial, %.3f per child change; server-side-apply %.3f, %.3f",
				d.initial, d.childChange, s.initial, s.childChange)
		}
	}
}

func runStrategyBenchmark(b *testing.B, ns string, strategy metacontroller.ApplyStrategy) strategyRun {
	ctx := context.Background()
	benchKubectl(b, crdYAML("BenchParent", "benchparents", "Namespaced"), "apply", "-f", "-")
	benchKubectl(b, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/benchparents.e2e.dcontroller.io")
	benchKubectl(b, "", "create", "namespace", ns)

	log := ctrl.Log.WithName("bench")
	mgr, rt, err := operator.NewManager(restConfig, operator.ManagerOptions{Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := metacontroller.Setup(mctx, mgr, metacontroller.Options{Logger: log, ApplyStrategy: strategy}); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(mctx)
		rt.Stop()
	}()
	defer func() {
		cancel()
		<-done
	}()
	h := &benchHook{seen: map[string]bool{}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	cc := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: benchparents
    labelSelector: {matchLabels: {bench: %s}}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s}
`, ns, ns, srv.URL)
	benchKubectl(b, cc, "apply", "-f", "-")
	defer benchKubectl(b, "", "delete", "compositecontroller", ns)
	time.Sleep(time.Second) // the controller starts

	parent := func(i int) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.dcontroller.io/v1", "kind": "BenchParent",
			"metadata": map[string]any{"name": fmt.Sprintf("p%04d", i), "namespace": ns, "labels": map[string]any{"bench": ns}},
			"spec":     map[string]any{"value": "v1"},
		}}
	}
	parallel := func(n int, fn func(i int) error) {
		var wg sync.WaitGroup
		next := atomic.Int64{}
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					if err := fn(i); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	children := func(value string) int {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind("ConfigMapList")
		if err := k8sClient.List(ctx, l, client.InNamespace(ns), client.HasLabels{"controller-uid"}); err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, c := range l.Items {
			if v, _, _ := unstructured.NestedString(c.Object, "data", "value"); v == value {
				n++
			}
		}
		return n
	}
	waitChildren := func(value string, want int, start time.Time) {
		for children(value) < want {
			if time.Since(start) > 10*time.Minute {
				b.Fatalf("%s: only %d children with value %s after 10 minutes", strategy, children(value), value)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}

	var r strategyRun
	start := time.Now()
	parallel(strategyBenchParents, func(i int) error { return k8sClient.Create(ctx, parent(i)) })
	waitChildren("v1", strategyBenchParents*benchChildren, start)
	r.converge = time.Since(start)
	h.quiet(3 * time.Second)
	r.initial = float64(h.calls.Load()) / strategyBenchParents

	c0 := h.calls.Load()
	start = time.Now()
	parallel(benchChanges, func(i int) error {
		return k8sClient.Patch(ctx, parent(i), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"value":"v2"}}`)))
	})
	waitChildren("v2", benchChanges*benchChildren, start)
	h.quiet(3 * time.Second)
	r.childChange = float64(h.calls.Load()-c0) / benchChanges
	return r
}

// hookBenchParents is the parent count of BenchmarkHookControllerAtServerRate.
const hookBenchParents = 1000

// benchBaselineEnv names another dctl binary (say, built from an earlier
// commit) that BenchmarkHookControllerAtServerRate runs too, on its own
// namespace right before the tree's binary, so that both are measured
// against the same plain loop in one run.
const benchBaselineEnv = "DCTL_BENCH_BASELINE"

// hookRun is what one dctl binary measured in
// BenchmarkHookControllerAtServerRate.
// hookBenchResources are the resources whose API requests the hook
// benchmark counts.
var hookBenchResources = []string{"configmaps", "benchparents", "events"}

type hookRun struct {
	elapsed time.Duration // the CompositeController's creation to every parent settled
	calls   float64       // hook calls per parent until quiet
	rss     int64         // peak RSS (VmHWM), bytes
	idleRSS int64         // VmHWM when ready, before the CompositeController
	anon    int64         // peak RssAnon sampled during the run, bytes
	reqs    string        // API requests per parent on hookBenchResources, by verb
	// Set by runHookProcess for BenchmarkHookControllerVsMetacontroller:
	children time.Duration // the CompositeController's creation to every child present
	cpu      time.Duration // CPU time (user and system) from the creation until the hook is quiet
	startCPU time.Duration // CPU time from the process's start until ready
	reqTotal float64       // API requests per parent on hookBenchResources, watches aside
	file     int64         // RssFile (the binary's pages and other file mappings) at the end, bytes
}

// BenchmarkHookControllerAtServerRate runs a CompositeController of 1,000
// parents with 3 ConfigMap children each and an instant hook whose status
// counts the children it observed, on the real `dctl start` binary with its
// default settings, next to a plain client-go loop that creates the same
// 3,000 children (labels and owner references as dctl writes them) and
// writes the 1,000 statuses, with as many workers as dctl's --workers
// default (metacontroller.DefaultWorkers, like with like) and no
// client-side rate limit. Both start with the parents present: the plain
// loop is timed from its first write, dctl from the CompositeController's
// creation (with the manager already running) to every parent's
// status.children being 3, seen on a watch. Reported: both times, their
// ratio (target <= 1.2, checked), hook calls per parent, the dctl
// process's peak RSS (VmHWM; target <= 50 MiB, checked) and its peak
// RssAnon (VmHWM less the binary's file pages, sampled). With
// DCTL_BENCH_PPROF_DIR set, CPU and heap profiles of the manager are saved
// there; with DCTL_BENCH_BASELINE set to another dctl binary, that one is
// measured too, right before, and reported with the suffix -baseline. Run
// with -benchtime=1x; with DCTL_BENCH_ROUNDS=N it runs N rounds and judges
// their median ratio (and the highest peak RSS).
func BenchmarkHookControllerAtServerRate(b *testing.B) {
	ctx := context.Background()
	benchKubectl(b, crdYAML("BenchParent", "benchparents", "Namespaced"), "apply", "-f", "-")
	benchKubectl(b, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/benchparents.e2e.dcontroller.io")
	c, err := client.New(unthrottled(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	baseline := os.Getenv(benchBaselineEnv)
	var ratios []float64
	var peak int64
	for i := 0; i < b.N*benchRounds(b); i++ {
		suffix := fmt.Sprintf("%d-%d", time.Now().Unix()%100000, i)
		plainNS, dctlNS, baseNS := "bench-hp-"+suffix, "bench-hd-"+suffix, "bench-hb-"+suffix
		benchKubectl(b, "", "create", "namespace", plainNS)
		plainParents := createBenchParents(b, c, plainNS, hookBenchParents)

		// The plain loop: per parent, its 3 children and then its status.
		reqs0 := serverRequests(b, hookBenchResources...)
		start := time.Now()
		runParallel(b, hookBenchParents, metacontroller.DefaultWorkers, func(j int) error {
			p := plainParents[j]
			for k := 0; k < benchChildren; k++ {
				cm := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", p.GetName(), k), "namespace": plainNS,
						"labels": map[string]any{metacontroller.ControllerUIDLabel: string(p.GetUID())},
						"ownerReferences": []any{map[string]any{"apiVersion": "e2e.dcontroller.io/v1", "kind": "BenchParent",
							"name": p.GetName(), "uid": string(p.GetUID()), "controller": true, "blockOwnerDeletion": true}}},
					"data": map[string]any{"value": "v1"}}}
				if err := c.Create(ctx, cm); err != nil {
					return err
				}
			}
			return c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType,
				[]byte(`{"status":{"children":3,"observedGeneration":1}}`)))
		})
		plain := time.Since(start)
		plainReqs := requestsSince(reqs0, serverRequests(b, hookBenchResources...), hookBenchParents)
		// Only dctl's parents and children stay, so its cache holds what it
		// serves.
		deleteBenchNS(b, c, plainNS)

		if baseline != "" {
			base := runHookDctl(b, c, baseline, baseNS, "hooks-baseline")
			deleteBenchNS(b, c, baseNS)
			b.Logf("baseline %s: dctl %v (%.2fx the plain loop); %.2f hook calls per parent; peak RSS %d MiB (%d MiB when ready), peak RssAnon %d MiB; API requests per parent %s",
				baseline, base.elapsed.Round(time.Millisecond), base.elapsed.Seconds()/plain.Seconds(), base.calls, base.rss>>20, base.idleRSS>>20, base.anon>>20, base.reqs)
			b.ReportMetric(base.elapsed.Seconds(), "s-dctl-baseline")
			b.ReportMetric(base.elapsed.Seconds()/plain.Seconds(), "time-ratio-baseline")
			b.ReportMetric(base.calls, "calls/parent-baseline")
			b.ReportMetric(float64(base.rss)/(1<<20), "peak-RSS-MiB-baseline")
			b.ReportMetric(float64(base.anon)/(1<<20), "peak-anon-MiB-baseline")
		}
		run := runHookDctl(b, c, dctlBin, dctlNS, "hooks")
		// The test control plane runs no namespace or garbage collector:
		// what a round leaves would be in the next round's caches.
		deleteBenchNS(b, c, dctlNS)

		ratio := run.elapsed.Seconds() / plain.Seconds()
		b.Logf("plain loop %v with %d workers; dctl %v; %.2f hook calls per parent; peak RSS %d MiB (%d MiB when ready, before the CompositeController), peak RssAnon %d MiB",
			plain.Round(time.Millisecond), metacontroller.DefaultWorkers, run.elapsed.Round(time.Millisecond), run.calls, run.rss>>20, run.idleRSS>>20, run.anon>>20)
		b.Logf("API requests per parent: plain loop %s; dctl %s", plainReqs, run.reqs)
		b.ReportMetric(plain.Seconds(), "s-plain")
		b.ReportMetric(run.elapsed.Seconds(), "s-dctl")
		b.ReportMetric(run.calls, "calls/parent")
		b.ReportMetric(float64(run.rss)/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(run.idleRSS)/(1<<20), "ready-RSS-MiB")
		b.ReportMetric(float64(run.anon)/(1<<20), "peak-anon-MiB")
		ratios = append(ratios, ratio)
		peak = max(peak, int64(run.rss))
	}
	m := median(ratios)
	b.ReportMetric(m, "time-ratio")
	if m > 1.2 {
		b.Errorf("dctl took %.2fx the plain loop's time (median of %d rounds: %.2f), want <= 1.2x", m, len(ratios), ratios)
	}
	if peak > 50<<20 {
		b.Errorf("dctl's peak RSS is %d MiB, want <= 50 MiB", peak>>20)
	}
}

// deleteBenchNS deletes the ConfigMaps and BenchParents of ns.
func deleteBenchNS(b *testing.B, c client.Client, ns string) {
	b.Helper()
	for _, obj := range []client.Object{benchList("v1", "ConfigMap"), benchList("e2e.dcontroller.io/v1", "BenchParent")} {
		if err := c.DeleteAllOf(context.Background(), obj, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
	}
}

// runHookDctl creates hookBenchParents parents in a new namespace ns, runs
// the dctl binary bin, creates the CompositeController and measures until
// every parent's status.children is 3; profiles are named after name.
func runHookDctl(b *testing.B, c client.Client, bin, ns, name string) hookRun {
	b.Helper()
	return runHookProcess(b, c, func() *dctlProcess { return startDctlBin(b, bin) }, ns, name)
}

// runHookProcess is runHookDctl with the manager process started by start
// (`dctl start` or Metacontroller's binary), once the parents are created.
func runHookProcess(b *testing.B, c client.Client, start func() *dctlProcess, ns, name string) hookRun {
	b.Helper()
	ctx := context.Background()
	benchKubectl(b, "", "create", "namespace", ns)
	createBenchParents(b, c, ns, hookBenchParents)
	h := &benchHook{seen: map[string]bool{}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	proc := start()
	var r hookRun
	r.idleRSS = proc.peakRSS(b)
	r.startCPU = proc.cpuTime(b)
	proc.saveSmaps(b, name+"-ready")
	anon := proc.sampleAnon()
	sw := watchSettled(b, ns)
	cw := watchChildren(b, ns, hookBenchParents*benchChildren)
	cc := fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: benchparents
    labelSelector: {matchLabels: {bench: %s}}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s}
`, ns, ns, srv.URL)
	ccObj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(cc), &ccObj.Object); err != nil {
		b.Fatal(err)
	}
	reqs0 := serverRequests(b, hookBenchResources...)
	cpu0 := proc.cpuTime(b)
	began := time.Now()
	proc.profile(b, name, 10*time.Second)
	if err := c.Create(ctx, ccObj); err != nil {
		b.Fatal(err)
	}
	if n := sw.wait(hookBenchParents, 10*time.Minute); n < hookBenchParents {
		b.Fatalf("only %d of %d parents with status.children 3 after 10m\n%s", n, hookBenchParents, tail(proc.logs.String(), 4000))
	}
	r.elapsed = time.Since(began)
	sw.stop()
	h.quiet(3 * time.Second)
	r.cpu = proc.cpuTime(b) - cpu0
	r.children = cw.since(began)
	cw.stop()
	reqs1 := serverRequests(b, hookBenchResources...)
	r.reqs = requestsSince(reqs0, reqs1, hookBenchParents)
	r.reqTotal = writeRequests(reqs0, reqs1, hookBenchParents)
	r.rss, r.anon = proc.peakRSS(b), anon()
	r.file = proc.status(b, "RssFile:")
	proc.saveSmaps(b, name+"-end")
	r.calls = float64(h.calls.Load()) / hookBenchParents
	if err := c.Delete(ctx, ccObj); err != nil {
		b.Error(err)
	}
	proc.stop(b)
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("v1")
	l.SetKind("ConfigMapList")
	if err := c.List(ctx, l, client.InNamespace(ns), client.HasLabels{metacontroller.ControllerUIDLabel}); err != nil {
		b.Fatal(err)
	}
	if len(l.Items) != hookBenchParents*benchChildren {
		b.Errorf("%s made %d children, want %d", proc.cmd.Path, len(l.Items), hookBenchParents*benchChildren)
	}
	return r
}

// benchList is an empty unstructured object of a kind, for DeleteAllOf.
func benchList(apiVersion, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// createBenchParents creates n BenchParents labelled bench=ns in ns and
// returns them as created.
func createBenchParents(b *testing.B, c client.Client, ns string, n int) []*unstructured.Unstructured {
	b.Helper()
	out := make([]*unstructured.Unstructured, n)
	runParallel(b, n, 8, func(i int) error {
		out[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.dcontroller.io/v1", "kind": "BenchParent",
			"metadata": map[string]any{"name": fmt.Sprintf("p%04d", i), "namespace": ns, "labels": map[string]any{"bench": ns}},
			"spec":     map[string]any{"value": "v1"},
		}}
		return c.Create(context.Background(), out[i])
	})
	return out
}

// runParallel runs fn(0..n-1) on workers goroutines; an error fails b.
func runParallel(b *testing.B, n, workers int, fn func(i int) error) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// settledWatch counts the BenchParents of a namespace whose status.children
// is 3, from a watch.
type settledWatch struct {
	w    watch.Interface
	done chan struct{}
	n    atomic.Int64
}

func watchSettled(tb testing.TB, ns string) *settledWatch {
	tb.Helper()
	dc, err := dynamic.NewForConfig(unthrottled())
	if err != nil {
		tb.Fatal(err)
	}
	res := dc.Resource(schema.GroupVersionResource{Group: "e2e.dcontroller.io", Version: "v1", Resource: "benchparents"}).Namespace(ns)
	l, err := res.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	timeout := int64(900)
	w, err := res.Watch(context.Background(), metav1.ListOptions{ResourceVersion: l.GetResourceVersion(), TimeoutSeconds: &timeout})
	if err != nil {
		tb.Fatal(err)
	}
	s := &settledWatch{w: w, done: make(chan struct{})}
	settled := func(u *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "children")
		return n == benchChildren
	}
	go func() {
		defer close(s.done)
		seen := map[string]bool{}
		for i := range l.Items {
			if settled(&l.Items[i]) {
				seen[l.Items[i].GetName()] = true
				s.n.Add(1)
			}
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || seen[u.GetName()] || !settled(u) {
				continue
			}
			seen[u.GetName()] = true
			s.n.Add(1)
		}
	}()
	return s
}

func (s *settledWatch) wait(n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for int(s.n.Load()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return int(s.n.Load())
}

func (s *settledWatch) stop() { s.w.Stop(); <-s.done }
