package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/metacontroller"
)

// The composite scale measurement (BenchmarkScaleComposite,
// TestScaleCompositeMeasurement): N BenchParents of about 1 KB, a
// CompositeController whose sync hook (an HTTP server in the test process)
// answers 3 ConfigMaps per parent and a status, run by `dctl start`; memory
// per cached object (parents and children) next to a bare client-go
// unstructured informer caching the same objects in its own process.

// benchParentsGVR is the resource of the BenchParent CRD (crdYAML).
var benchParentsGVR = schema.GroupVersionResource{Group: "e2e.dcontroller.io", Version: "v1", Resource: "benchparents"}

// compositeChildren is how many ConfigMaps the hook answers per parent.
const compositeChildren = benchChildren

// compositeParentName is the name of parent i.
func compositeParentName(i int) string { return fmt.Sprintf("shop-%06d", i) }

// compositeApp is the app label of parent i.
func compositeApp(i int) string { return fmt.Sprintf("app-%03d", i%100) }

// compositeParent is parent i of ns, labelled bench=ns: about 1 KB of JSON
// once the API server has added its metadata and the hook's status is
// written (labels, two annotations, a spec like a small application's:
// image, replicas, ports, env, resources, features).
func compositeParent(ns string, i int) *unstructured.Unstructured {
	app := compositeApp(i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.dcontroller.io/v1", "kind": "BenchParent",
		"metadata": map[string]any{
			"name": compositeParentName(i), "namespace": ns,
			"labels": map[string]any{"bench": ns, "app": app, "tier": "web", "team": "payments"},
			"annotations": map[string]any{
				"example.com/owner":       "payments-oncall@example.com",
				"example.com/description": "storefront shard " + strconv.Itoa(i) + " of the " + app + " service",
			},
		},
		"spec": map[string]any{
			"value":    "v1",
			"image":    "registry.example.com/shop/" + app + ":1.24.3",
			"replicas": int64(i%5 + 1),
			"ports":    []any{map[string]any{"name": "http", "port": int64(8080)}, map[string]any{"name": "metrics", "port": int64(9090)}},
			"env": []any{
				map[string]any{"name": "APP", "value": app},
				map[string]any{"name": "REGION", "value": "eu-west-1"},
				map[string]any{"name": "LOG_LEVEL", "value": "info"},
			},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]any{"cpu": "500m", "memory": "256Mi"},
			},
			"features": []any{"metrics", "tracing", "canary"},
		},
	}}
}

// compositeChildData is the data of child k of the parent named parent
// (app label app, spec.value value): about 500 bytes.
func compositeChildData(parent, app, value string, k int) map[string]any {
	return map[string]any{
		"value": value,
		"app.properties": fmt.Sprintf("app.name=%s\napp.shard=%s\napp.part=%d\napp.version=%s\n"+
			"server.port=8080\nmanagement.port=9090\nlogging.level=info\nlogging.format=json\n"+
			"cache.size=256\ncache.ttl=300s\ndb.pool.min=2\ndb.pool.max=16\ndb.timeout=5s\n", app, parent, k, value),
		"routes.yaml": fmt.Sprintf("routes:\n  - path: /%s/%d\n    backend: %s\n    timeout: 30s\n    retries: 3\n", parent, k, app),
	}
}

// compositeStatus is the status the hook answers for a parent with spec
// value value that observed n children.
func compositeStatus(value string, n int) map[string]any {
	return map[string]any{"children": int64(n), "observedValue": value}
}

// compositeHook is BenchmarkScaleComposite's sync hook: per parent,
// compositeChildren ConfigMaps named <parent>-<k> with compositeChildData,
// and compositeStatus counting the ConfigMaps it observed. It counts calls.
type compositeHook struct{ calls atomic.Int64 }

func (h *compositeHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Parent struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Value string `json:"value"`
			} `json:"spec"`
		} `json:"parent"`
		Children map[string]map[string]json.RawMessage `json:"children"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.calls.Add(1)
	p := req.Parent
	children := make([]any, compositeChildren)
	for k := range children {
		children[k] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", p.Metadata.Name, k), "labels": map[string]any{"app": p.Metadata.Labels["app"]}},
			"data":     compositeChildData(p.Metadata.Name, p.Metadata.Labels["app"], p.Spec.Value, k)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"children": children,
		"status": compositeStatus(p.Spec.Value, len(req.Children["ConfigMap.v1"]))})
}

// quiet waits until the hook got no call for d.
func (h *compositeHook) quiet(d time.Duration) { waitQuiet(&h.calls, d) }

// compositeResult is one composite scale measurement at N parents.
type compositeResult struct {
	n                       int
	parentBytes, childBytes int // mean JSON size as listed, managedFields dropped
	create                  time.Duration
	// informer is the unstructured informer child's figures; its Objects
	// are every BenchParent and ConfigMap of the cluster (4N and the few
	// ConfigMaps of other namespaces), which dctl's cache holds too.
	informer scaleFigures
	// dctl: before is the idle manager (no CompositeController), after the
	// steady state; Sync is from creating the CompositeController to every
	// parent's status seen on a watch; Objects are the informer's.
	dctl scaleFigures
	// fromStart is from starting the dctl process to every status.
	fromStart time.Duration
	// calls are the hook calls until steady state.
	calls int64
	// requests are the API requests on benchparents, configmaps and events
	// from the CompositeController's creation to steady state, watches
	// aside, per parent (reqTotal) and by verb (reqs).
	reqTotal float64
	reqs     string
	// released are dctl's log lines of returning free heap pages after
	// the initial syncs.
	released []string
	// parents and children are the namespace's objects at the end.
	parents, children []unstructured.Unstructured
}

// compositeCC is the CompositeController of the measurement: parents
// labelled bench=NS, ConfigMap children updated in place, the sync hook at
// URL.
const compositeCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: NS}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: benchparents
    labelSelector: {matchLabels: {bench: NS}}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: URL}
`

// measureScaleComposite creates n parents in a namespace of its own, runs
// the CompositeController on `dctl start` to steady state and measures it,
// then the unstructured informer child over the same objects (see
// compositeResult); the objects and the namespace are deleted at the end.
func measureScaleComposite(tb testing.TB, n int) *compositeResult {
	tb.Helper()
	ctx := context.Background()
	kubectlTB(tb, crdYAML("BenchParent", "benchparents", "Namespaced"), "apply", "-f", "-")
	kubectlTB(tb, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/benchparents.e2e.dcontroller.io")
	pcfg := unthrottled()
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		tb.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(unthrottled())
	if err != nil {
		tb.Fatal(err)
	}
	parents := dc.Resource(benchParentsGVR)
	r := &compositeResult{n: n}
	ns := fmt.Sprintf("scalecc-%d-%d", n, time.Now().UnixNano()%1_000_000)
	tb.Cleanup(func() {
		t0 := time.Now()
		progress("deleting the %d parents and %d children", n, n*compositeChildren)
		deleteCompositeScale(tb, cs, dc, ns, n)
		tb.Logf("deleting the %d parents and %d children took %s", n, n*compositeChildren, time.Since(t0).Round(time.Millisecond))
	})
	start := time.Now()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	created := newCounter(n, "parents created")
	if err := parallel(n, scaleWorkers, func(i int) error {
		_, err := parents.Namespace(ns).Create(ctx, compositeParent(ns, i), metav1.CreateOptions{})
		if err == nil {
			created.step()
		}
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	r.create = time.Since(start)

	h := &compositeHook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	// The start-up pages are released 1s after the caches' sync, before
	// the idle figure, not while the CompositeController syncs.
	procStart := time.Now()
	p := startScaleDctl(tb, "--release-startup-pages-after=1s")
	time.Sleep(2 * time.Second)
	r.dctl.Before = p.memory(tb)

	sw := watchSettled(tb, ns)
	defer sw.stop()
	cc := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.NewReplacer("NS", ns, "URL", srv.URL).Replace(compositeCC)), &cc.Object); err != nil {
		tb.Fatal(err)
	}
	reqs0 := serverRequests(tb, hookBenchResources...)
	progress("creating the CompositeController: %d children of %d parents", n*compositeChildren, n)
	ccStart := time.Now()
	if err := k8sClient.Create(ctx, cc); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := k8sClient.Delete(context.Background(), cc); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("deleting the CompositeController: %v", err)
		}
	})
	timeout := time.Duration(n/20+60) * time.Second
	if got := sw.wait(n, timeout); got < n {
		tb.Fatalf("%d of %d parents with status.children %d after %s\n%s", got, n, compositeChildren, timeout, tail(p.logs.String(), 4000))
	}
	r.dctl.Sync = time.Since(ccStart)
	r.fromStart = time.Since(procStart)
	// Steady state: the hook quiet (the follow-ups of the status writes
	// done), then nothing more to do for the manager (which returns the
	// free pages of a large initial sync once 2s have passed since its
	// last sync and its allocations have settled: 0.5s more).
	h.quiet(3 * time.Second)
	r.calls = h.calls.Load()
	reqs1 := serverRequests(tb, hookBenchResources...)
	r.reqs = requestsSince(reqs0, reqs1, n)
	r.reqTotal = writeRequests(reqs0, reqs1, n)
	time.Sleep(2 * time.Second)
	r.dctl.After = p.memory(tb)
	p.saveHeap(tb, "composite")
	p.stop(tb)
	r.released = p.loadReleases()

	progress("every status after %s; caching the parents and children in a bare informer", r.dctl.Sync.Round(time.Millisecond))
	r.informer = runInformerChild(tb, "composite", ns)
	r.dctl.Objects = r.informer.Objects

	pl, err := parents.Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	cl, err := dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).List(ctx,
		metav1.ListOptions{LabelSelector: metacontroller.ControllerUIDLabel})
	if err != nil {
		tb.Fatal(err)
	}
	r.parents, r.children = pl.Items, cl.Items
	r.parentBytes, r.childBytes = meanJSONSize(tb, r.parents), meanJSONSize(tb, r.children)
	return r
}

// saveHeap saves, with DCTL_BENCH_PPROF_DIR set, the process's heap
// profile after a forced GC (heap-<name>.pprof; run with
// GODEBUG=memprofilerate=4096 for a finer one) and its
// /debug/pprof/heap?debug=1 text with the runtime's MemStats
// (memstats-<name>.txt) there; nothing when the variable is unset.
func (p *scaleDctl) saveHeap(tb testing.TB, name string) {
	tb.Helper()
	dir := os.Getenv(benchPprofDirEnv)
	if dir == "" {
		return
	}
	for path, file := range map[string]string{"/debug/pprof/heap?gc=1": "heap-" + name + ".pprof", "/debug/pprof/heap?debug=1": "memstats-" + name + ".txt"} {
		if err := savePprof(p.pprof, path, file); err != nil {
			tb.Errorf("pprof %s: %v", path, err)
		}
	}
}

// meanJSONSize is the mean size of the objects' JSON without
// managedFields.
func meanJSONSize(tb testing.TB, objs []unstructured.Unstructured) int {
	tb.Helper()
	size := 0
	for i := range objs {
		o := objs[i].DeepCopy()
		o.SetManagedFields(nil)
		b, err := json.Marshal(o.Object)
		if err != nil {
			tb.Fatal(err)
		}
		size += len(b)
	}
	return size / max(len(objs), 1)
}

// deleteCompositeScale deletes the children and parents of ns, one request
// each from scaleWorkers workers (see deleteScaleNamespace), and then ns,
// without waiting for the namespace to go.
func deleteCompositeScale(tb testing.TB, cs kubernetes.Interface, dc dynamic.Interface, ns string, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	zero := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	err := parallel(n*(compositeChildren+1), scaleWorkers, func(i int) error {
		var err error
		if parent, k := i/(compositeChildren+1), i%(compositeChildren+1); k < compositeChildren {
			err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("%s-%d", compositeParentName(parent), k), opts)
		} else {
			err = dc.Resource(benchParentsGVR).Namespace(ns).Delete(ctx, compositeParentName(parent), opts)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting object %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		tb.Errorf("deleting the objects of %s: %v", ns, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		tb.Errorf("deleting namespace %s: %v", ns, err)
	}
}

// kubectlTB runs kubectl and fails tb on an error.
func kubectlTB(tb testing.TB, stdin string, args ...string) {
	tb.Helper()
	if out, err := kubectlB(stdin, args...); err != nil {
		tb.Fatalf("kubectl %v: %v: %s", args, err, out)
	}
}

// table formats the result for the log.
func (r *compositeResult) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d parents of %d B and %d children of %d B (JSON, no managedFields), parents created in %s; %d objects cached (4N = %d); "+
		"per object = (after - before) / objects, after a forced GC\n",
		r.n, r.parentBytes, len(r.children), r.childBytes, r.create.Round(time.Millisecond), r.informer.Objects, 4*r.n)
	fmt.Fprintf(&b, "%-22s %12s %12s %12s %12s %10s\n", "", "heapInuse/obj", "heapAlloc/obj", "RSS/obj", "RssAnon/obj", "sync")
	row := func(name string, f scaleFigures) {
		po := f.perObject()
		fmt.Fprintf(&b, "%-22s %12d %12d %12d %12d %10s\n", name, po.HeapInuse, po.HeapAlloc, po.RSS, po.Anon, f.Sync.Round(time.Millisecond))
	}
	row("informer unstructured", r.informer)
	row("dctl start", r.dctl)
	u, d := r.informer.perObject(), r.dctl.perObject()
	fmt.Fprintf(&b, "dctl / unstructured informer: heap %.2f, live heap %.2f, RSS %.2f, RssAnon %.2f\n",
		float64(d.HeapInuse)/float64(u.HeapInuse), float64(d.HeapAlloc)/float64(u.HeapAlloc), float64(d.RSS)/float64(u.RSS), float64(d.Anon)/float64(u.Anon))
	fmt.Fprintf(&b, "dctl totals at steady state: RSS %d MiB, RssAnon %d MiB, heapInuse %d MiB (idle: %d, %d, %d MiB)\n",
		r.dctl.After.RSS>>20, r.dctl.After.Anon>>20, r.dctl.After.HeapInuse>>20, r.dctl.Before.RSS>>20, r.dctl.Before.Anon>>20, r.dctl.Before.HeapInuse>>20)
	fmt.Fprintf(&b, "all statuses %s after the CompositeController's creation, %s after dctl's start; %.2f hook calls per parent; API requests per parent %.2f (%s)",
		r.dctl.Sync.Round(time.Millisecond), r.fromStart.Round(time.Millisecond), float64(r.calls)/float64(r.n), r.reqTotal, r.reqs)
	b.WriteString("\n" + releasedLine(r.released, "the initial syncs"))
	return b.String()
}

// BenchmarkScaleComposite creates DCTL_SCALE_N BenchParents (default
// 10,000) of about 1 KB in a namespace of their own and runs, on `dctl
// start` (the manager idle and its start-up pages released first), a
// CompositeController whose sync hook, an HTTP server in the benchmark
// process, answers per parent 3 ConfigMaps of about 500 B of data and a
// status counting the ConfigMaps it observed. Steady state is every
// parent's status.children 3 (on a watch: the hook observed all 3N
// children) and the hook quiet for 3s. Then, each in its own process: dctl
// and a client-go unstructured informer caching every BenchParent and
// ConfigMap of the cluster, as the manager's cache does (managedFields
// dropped). Memory per cached object (parents and children, 4N and the
// few other ConfigMaps of the cluster) is (after - before) / objects, each
// after a forced GC: Go heap in use and live heap (dctl's through its
// pprof endpoint), RSS and RssAnon (/proc/PID/status); before is the idle
// manager without the CompositeController and the informer child before
// its informers start. Also reported: the time from the
// CompositeController's creation and from dctl's start to every status,
// hook calls per parent and API requests per parent (counted on the API
// server). Run with -benchtime=1x (make bench-scale-composite N=...).
func BenchmarkScaleComposite(b *testing.B) {
	n, err := scaleCount(1, "parents")
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		r := measureScaleComposite(b, n)
		b.Logf("\n%s", r.table())
		u, d := r.informer.perObject(), r.dctl.perObject()
		b.ReportMetric(float64(d.HeapInuse), "dctl-heap-B/obj")
		b.ReportMetric(float64(d.HeapAlloc), "dctl-live-B/obj")
		b.ReportMetric(float64(d.RSS), "dctl-rss-B/obj")
		b.ReportMetric(float64(d.Anon), "dctl-anon-B/obj")
		b.ReportMetric(float64(u.HeapInuse), "informer-heap-B/obj")
		b.ReportMetric(float64(u.HeapAlloc), "informer-live-B/obj")
		b.ReportMetric(float64(u.RSS), "informer-rss-B/obj")
		b.ReportMetric(float64(u.Anon), "informer-anon-B/obj")
		b.ReportMetric(float64(d.HeapInuse)/float64(u.HeapInuse), "heap-ratio")
		b.ReportMetric(float64(d.HeapAlloc)/float64(u.HeapAlloc), "live-heap-ratio")
		b.ReportMetric(float64(d.RSS)/float64(u.RSS), "rss-ratio")
		b.ReportMetric(float64(d.Anon)/float64(u.Anon), "anon-ratio")
		b.ReportMetric(r.dctl.Sync.Seconds(), "s-to-statuses")
		b.ReportMetric(r.fromStart.Seconds(), "s-from-start-to-statuses")
		b.ReportMetric(float64(r.calls)/float64(n), "calls/parent")
		b.ReportMetric(r.reqTotal, "requests/parent")
	}
}

// TestScaleCompositeMeasurement runs BenchmarkScaleComposite's measurement
// at 500 parents and checks what it measured, not how fast or how much:
// every parent's status as the hook answered it, every child with the
// hook's data, labels and the parent as controller owner, the objects both
// processes cached, at least one hook call per parent, the release of the
// free heap pages after the initial syncs logged once, and each per-object
// heap figure at least an object's JSON size.
func TestScaleCompositeMeasurement(t *testing.T) {
	const n = 500
	start := time.Now()
	r := measureScaleComposite(t, n)
	t.Logf("\n%s", r.table())
	if len(r.parents) != n {
		t.Errorf("%d parents, want %d", len(r.parents), n)
	}
	uids := map[string]*unstructured.Unstructured{}
	for i := range r.parents {
		p := &r.parents[i]
		uids[string(p.GetUID())] = p
		// The hook's status, with the generation it answered for.
		st, _, _ := unstructured.NestedMap(p.Object, "status")
		want := compositeStatus("v1", compositeChildren)
		want["observedGeneration"] = p.GetGeneration()
		if !equalJSON(st, want) {
			t.Errorf("parent %s: status %v, want %v", p.GetName(), st, want)
			break
		}
	}
	if len(r.children) != n*compositeChildren {
		t.Errorf("%d children, want %d", len(r.children), n*compositeChildren)
	}
	seen := map[string]bool{}
	for i := range r.children {
		c := &r.children[i]
		ref := metav1.GetControllerOf(c)
		if ref == nil || uids[string(ref.UID)] == nil {
			t.Errorf("child %s: controller %v is none of the parents", c.GetName(), ref)
			break
		}
		p := uids[string(ref.UID)]
		idx := strings.LastIndexByte(c.GetName(), '-')
		k, err := strconv.Atoi(c.GetName()[idx+1:])
		if idx < 0 || err != nil || c.GetName()[:idx] != p.GetName() || k >= compositeChildren {
			t.Errorf("child %s of parent %s: not a name the hook answers", c.GetName(), p.GetName())
			break
		}
		seen[c.GetName()] = true
		app := p.GetLabels()["app"]
		data, _, _ := unstructured.NestedMap(c.Object, "data")
		if want := compositeChildData(p.GetName(), app, "v1", k); !equalJSON(data, want) {
			t.Errorf("child %s: data %v, want %v", c.GetName(), data, want)
			break
		}
		if l := c.GetLabels(); l["app"] != app || l[metacontroller.ControllerUIDLabel] != string(p.GetUID()) {
			t.Errorf("child %s: labels %v, want app=%s and %s=%s", c.GetName(), l, app, metacontroller.ControllerUIDLabel, p.GetUID())
			break
		}
	}
	if len(seen) != n*compositeChildren {
		t.Errorf("%d distinct children, want %d", len(seen), n*compositeChildren)
	}
	if r.calls < n {
		t.Errorf("%d hook calls for %d parents", r.calls, n)
	}
	// 4N objects are a large initial load: its free pages are returned
	// once, before the measurement.
	if len(r.released) != 1 || !strings.Contains(r.released[0], fmt.Sprintf(`"objects": %d`, r.informer.Objects)) {
		t.Errorf("dctl logged %d releases of free heap pages after the initial syncs, want 1 with the %d objects cached: %q", len(r.released), r.informer.Objects, r.released)
	}
	if r.parentBytes < 700 || r.parentBytes > 2000 || r.childBytes < 500 || r.childBytes > 3000 {
		t.Errorf("a parent is %d B and a child %d B of JSON, want about 1 KB and 0.5-3 KB", r.parentBytes, r.childBytes)
	}
	// The informer caches the cluster's ConfigMaps: ours and a few more.
	if o := r.informer.Objects; o < 4*n || o > 4*n+1000 {
		t.Errorf("the informer cached %d objects, want %d and the cluster's few other ConfigMaps", o, 4*n)
	}
	minBytes := int64(min(r.parentBytes, r.childBytes))
	for name, f := range map[string]scaleFigures{"unstructured informer": r.informer, "dctl": r.dctl} {
		if f.Sync <= 0 {
			t.Errorf("%s: sync time %s", name, f.Sync)
		}
		po := f.perObject()
		for what, v := range map[string]int64{"heap in use": po.HeapInuse, "heap allocated": po.HeapAlloc} {
			if v < minBytes || v > 200<<10 {
				t.Errorf("%s: %s per object %d B, want between an object's %d B and 200 KiB", name, what, v, minBytes)
			}
		}
		if po.RSS <= 0 || po.Anon <= 0 {
			t.Errorf("%s: RSS %d B and RssAnon %d B per object, want more than 0", name, po.RSS, po.Anon)
		}
	}
	if !slices.ContainsFunc(strings.Split(r.reqs, ", "), func(s string) bool { return strings.HasPrefix(s, "POST configmaps ") }) {
		t.Errorf("API requests per parent %q: no ConfigMap created", r.reqs)
	}
	t.Logf("the measurement at %d parents took %s", n, time.Since(start).Round(time.Second))
}

// equalJSON reports whether a and b are equal once both are JSON (numbers
// of either type compare by value).
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
