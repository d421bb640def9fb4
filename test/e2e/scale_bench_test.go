package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

// The scale measurement (BenchmarkScale,
// TestScaleMeasurementAtTenThousand): N pods of about 1.45 KB of JSON,
// cached by a bare client-go informer (unstructured and typed, each in its
// own process) and by `dctl start` running one Operator that projects every
// pod into a view; memory per pod, time to a full cache or a full view, and
// change → view latency next to the API server's own watch.

const (
	// scaleNEnv sets BenchmarkScale's pod count (default scaleDefaultN).
	scaleNEnv     = "DCTL_SCALE_N"
	scaleDefaultN = 10_000
	// scaleInformerEnv, set to "unstructured" or "typed", makes the test
	// binary an informer child (runScaleInformer) instead of the suite: it
	// caches the pods of namespace scaleNamespaceEnv in the cluster of
	// kubeconfig scaleKubeconfigEnv, prints a scaleFigures JSON line and
	// exits.
	scaleInformerEnv   = "DCTL_SCALE_INFORMER"
	scaleNamespaceEnv  = "DCTL_SCALE_NAMESPACE"
	scaleKubeconfigEnv = "DCTL_SCALE_KUBECONFIG"
	// scaleChanges is how many label changes the latency is measured over.
	scaleChanges = 200
	// scaleWorkers is how many requests create (and delete) the pods at once.
	scaleWorkers = 48
)

// scaleOperator projects every pod of namespace NS into a ScalePod view
// (group scale.view.dcontroller.io): name, namespace, labels (the latency
// changes patch the gen label) and a few spec and status fields. It writes
// nothing to the API server.
const scaleOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: scale
spec:
  controllers:
    - name: project-pods
      sources:
        - apiGroup: ""
          kind: Pod
          namespace: NS
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            labels: "$.metadata.labels"
          spec:
            image: "$.spec.containers[0].image"
            phase: "$.status.phase"
            podIP: "$.status.podIP"
      target:
        kind: ScalePod
`

// A child process started with scaleInformerEnv runs the informer and exits
// before the suite's TestMain starts a control plane.
func init() {
	if mode := os.Getenv(scaleInformerEnv); mode != "" {
		os.Exit(runScaleInformer(mode))
	}
}

// memFigures is one process's memory at one moment, in bytes: VmRSS and
// RssAnon of /proc/PID/status (RSS counts the binary's mapped file pages,
// RssAnon only the process's own memory), and the Go runtime's HeapInuse and
// HeapAlloc right after a forced garbage collection.
type memFigures struct {
	RSS       int64 `json:"rss"`
	Anon      int64 `json:"anon"`
	HeapInuse int64 `json:"heapInuse"`
	HeapAlloc int64 `json:"heapAlloc"`
}

// scaleFigures is what a cache of N pods cost: memory before the pods were
// listed and after the cache holds them all (both after a forced GC), and the
// time from starting the list to a full cache.
type scaleFigures struct {
	Objects int           `json:"objects"`
	Before  memFigures    `json:"before"`
	After   memFigures    `json:"after"`
	Sync    time.Duration `json:"sync"`
}

// perObject returns (after - before) / Objects for each figure, in bytes.
func (f scaleFigures) perObject() memFigures {
	n := int64(max(f.Objects, 1))
	return memFigures{
		RSS:       (f.After.RSS - f.Before.RSS) / n,
		Anon:      (f.After.Anon - f.Before.Anon) / n,
		HeapInuse: (f.After.HeapInuse - f.Before.HeapInuse) / n,
		HeapAlloc: (f.After.HeapAlloc - f.Before.HeapAlloc) / n,
	}
}

// selfMemory measures this process after a forced GC.
func selfMemory() (memFigures, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f := memFigures{HeapInuse: int64(ms.HeapInuse), HeapAlloc: int64(ms.HeapAlloc)}
	var err error
	if f.RSS, err = procStatus(os.Getpid(), "VmRSS:"); err != nil {
		return f, err
	}
	f.Anon, err = procStatus(os.Getpid(), "RssAnon:")
	return f, err
}

// runScaleInformer is the informer child: client-go SharedInformers, with a
// transform dropping managedFields (as the manager's cache does), no
// resync. Mode "unstructured" (dynamicinformer) and "typed" (core/v1) cache
// the pods of one namespace; mode "composite" caches, unstructured, what
// `dctl start` caches for BenchmarkScaleComposite's CompositeController:
// every BenchParent and every ConfigMap of the cluster (the manager's
// informers are cluster-wide). It prints a scaleFigures JSON line on
// stdout: memory after the clients are made and before the informers
// start, memory once they have synced, the objects they hold and the time
// from start to synced. It returns the process's exit code.
func runScaleInformer(mode string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "informer child (%s): %v\n", mode, err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(scaleKubeconfigEnv))
	if err != nil {
		return fail(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	ns := os.Getenv(scaleNamespaceEnv)
	var infs []cache.SharedIndexInformer
	switch mode {
	case "unstructured", "composite":
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return fail(err)
		}
		if mode == "composite" {
			f := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
			infs = append(infs, f.ForResource(benchParentsGVR).Informer(),
				f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Informer())
			break
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
		infs = append(infs, f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer())
	case "typed":
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fail(err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		infs = append(infs, f.Core().V1().Pods().Informer())
	default:
		return fail(fmt.Errorf("%s=%q: want unstructured, typed or composite", scaleInformerEnv, mode))
	}
	// Drop managedFields, as the manager's cache does (and
	// controller-runtime's cache.TransformStripManagedFields).
	for _, inf := range infs {
		if err := inf.SetTransform(func(in any) (any, error) {
			if o, err := meta.Accessor(in); err == nil {
				o.SetManagedFields(nil)
			}
			return in, nil
		}); err != nil {
			return fail(err)
		}
	}
	var out scaleFigures
	if out.Before, err = selfMemory(); err != nil {
		return fail(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	for _, inf := range infs {
		go inf.Run(stop)
	}
	for _, inf := range infs {
		if !cache.WaitForCacheSync(stop, inf.HasSynced) {
			return fail(fmt.Errorf("the informer did not sync"))
		}
	}
	out.Sync = time.Since(start)
	for _, inf := range infs {
		out.Objects += len(inf.GetStore().ListKeys())
	}
	if out.After, err = selfMemory(); err != nil {
		return fail(err)
	}
	runtime.KeepAlive(infs)
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return fail(err)
	}
	return 0
}

// scalePod is pod i of ns: about 1.3 KB of JSON without managedFields once
// the API server has added its defaults and the status is written (labels,
// an annotation, a container with a port, env and resources). Its gen label
// is "g0".
func scalePod(ns string, i int) *corev1.Pod {
	app := fmt.Sprintf("app-%03d", i%100)
	container := func(name string, port int32) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example.com/" + name + ":v1.2",
			Ports: []corev1.ContainerPort{{ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			Env:   []corev1.EnvVar{{Name: "APP", Value: app}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: scalePodName(i), Namespace: ns,
			Labels:      map[string]string{"app": app, "tier": "web", "gen": "g0"},
			Annotations: map[string]string{"example.com/team": "payments"},
		},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{container("main", 8080)},
			TerminationGracePeriodSeconds: new(int64),
			AutomountServiceAccountToken:  new(bool),
		},
	}
}

func scalePodName(i int) string { return fmt.Sprintf("web-7d9f8c6b5-%06d", i) }

// scalePodIP is pod i's status.podIP.
func scalePodIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }

// scaleStatusPatch is the merge patch of pod i's status: running and ready.
func scaleStatusPatch(i int) []byte {
	cond := func(t string) string {
		return `{"type":"` + t + `","status":"True","lastTransitionTime":"2026-01-01T00:00:10Z"}`
	}
	ip := scalePodIP(i)
	return []byte(`{"status":{"phase":"Running","podIP":"` + ip + `","podIPs":[{"ip":"` + ip + `"}],` +
		`"conditions":[` + cond("Ready") + `,` + cond("PodScheduled") + `]}}`)
}

// progress prints a scale benchmark's step to standard error as it
// happens, with the time of day: go test prints a benchmark's b.Logf
// lines only when it ends, at 100k pods many minutes later, while the
// test binary's standard error reaches the terminal at once with -bench
// (and is kept with the test's output without it).
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: %s %s\n", time.Now().Format(time.TimeOnly), fmt.Sprintf(format, args...))
}

// counter counts n steps done by many goroutines and prints a progress
// line (what: "pods created") at each tenth of n, with the time since it
// was made.
type counter struct {
	n     int64
	done  atomic.Int64
	what  string
	start time.Time
}

func newCounter(n int, what string) *counter {
	return &counter{n: int64(n), what: what, start: time.Now()}
}

// step counts one step done.
func (c *counter) step() {
	d := c.done.Add(1)
	if tenth := max(c.n/10, 1); d%tenth == 0 || d == c.n {
		progress("%d of %d %s (%s)", d, c.n, c.what, time.Since(c.start).Round(time.Second))
	}
}

// parallel runs fn(i) for i in [0, n) from workers goroutines and returns
// the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n && first.Load() == nil; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// createScalePods creates namespace ns and its n pods (scalePod, then its
// status) from scaleWorkers workers without client-side rate limiting.
func createScalePods(tb testing.TB, cs kubernetes.Interface, ns string, n int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	created := newCounter(n, "pods created")
	err := parallel(n, scaleWorkers, func(i int) error {
		var err error
		// The ServiceAccount admission needs the namespace's default
		// ServiceAccount, which the controller manager makes in a moment.
		for try := 0; try < 100; try++ {
			if _, err = cs.CoreV1().Pods(ns).Create(ctx, scalePod(ns, i), metav1.CreateOptions{}); err == nil ||
				!strings.Contains(err.Error(), "serviceaccount") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("creating pod %d: %w", i, err)
		}
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, scalePodName(i), types.MergePatchType, scaleStatusPatch(i), metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("writing pod %d's status: %w", i, err)
		}
		created.step()
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// deleteScaleNamespace deletes the pods of ns, one request each from
// scaleWorkers workers (so that no later test's cache lists them while the
// namespace controller works; a deletecollection deletes one at a time and
// took twice as long), and then ns, without waiting for the namespace to go.
func deleteScaleNamespace(tb testing.TB, cs kubernetes.Interface, ns string, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	zero := int64(0)
	deleted := newCounter(n, "pods deleted")
	err := parallel(n, scaleWorkers, func(i int) error {
		err := cs.CoreV1().Pods(ns).Delete(ctx, scalePodName(i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting pod %d: %w", i, err)
		}
		deleted.step()
		return nil
	})
	if err != nil {
		tb.Errorf("deleting the pods of %s: %v", ns, err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		tb.Errorf("deleting namespace %s: %v", ns, err)
	}
}

// runInformerChild re-executes the test binary as an informer child (mode
// "unstructured" or "typed") over the pods of ns and returns its figures.
func runInformerChild(tb testing.TB, mode, ns string) scaleFigures {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), scaleInformerEnv+"="+mode, scaleNamespaceEnv+"="+ns, scaleKubeconfigEnv+"="+kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("informer child (%s): %v\n%s", mode, err, stderr.String())
	}
	var f scaleFigures
	if err := json.Unmarshal(out, &f); err != nil {
		tb.Fatalf("informer child (%s) printed %q: %v", mode, out, err)
	}
	return f
}

// scaleDctl is a `dctl start` process with its pprof endpoint and view API
// server on free loopback ports.
type scaleDctl struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	pprof  string
	api    string
	exited chan error
}

// startScaleDctl runs `dctl start` with args added to its flags and waits
// until it is ready.
func startScaleDctl(tb testing.TB, args ...string) *scaleDctl {
	tb.Helper()
	p := &scaleDctl{logs: &syncBuffer{}, exited: make(chan error, 1), pprof: scaleFreeAddr(tb), api: scaleFreeAddr(tb)}
	health := scaleFreeAddr(tb)
	p.cmd = exec.Command(dctlBin, "start", "--kubeconfig", kubeconfig, "--health-addr", health, "--metrics-addr", "0",
		"--api-server-addr", p.api, "--pprof-address", p.pprof, "--rgd=false")
	p.cmd.Args = append(p.cmd.Args, args...)
	p.cmd.Args = append(p.cmd.Args, strings.Fields(os.Getenv(benchDctlArgsEnv))...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	tb.Cleanup(func() { p.stop(tb) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get("http://" + health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			tb.Fatalf("dctl start exited: %v\n%s", err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("dctl start not ready after 60s\n%s", p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func scaleFreeAddr(tb testing.TB) string {
	tb.Helper()
	if b, ok := tb.(*testing.B); ok {
		return benchFreeAddr(b)
	}
	return freeAddr(tb.(*testing.T))
}

// memory measures the process after a forced GC: GET /debug/pprof/heap?gc=1
// collects, /debug/pprof/heap?debug=1 ends with the runtime.MemStats
// ("# HeapInuse = N"), and /proc/PID/status gives VmRSS and RssAnon.
func (p *scaleDctl) memory(tb testing.TB) memFigures {
	tb.Helper()
	get := func(path string) []byte {
		resp, err := http.Get("http://" + p.pprof + path)
		if err != nil {
			tb.Fatalf("pprof %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("pprof %s: %d %v", path, resp.StatusCode, err)
		}
		return b
	}
	get("/debug/pprof/heap?gc=1")
	var f memFigures
	sc := bufio.NewScanner(bytes.NewReader(get("/debug/pprof/heap?debug=1")))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil {
			continue
		}
		switch name {
		case "HeapInuse":
			f.HeapInuse = n
		case "HeapAlloc":
			f.HeapAlloc = n
		}
	}
	if f.HeapInuse == 0 || f.HeapAlloc == 0 {
		tb.Fatalf("no HeapInuse/HeapAlloc in dctl's /debug/pprof/heap?debug=1")
	}
	var err error
	if f.RSS, err = procStatus(p.cmd.Process.Pid, "VmRSS:"); err != nil {
		tb.Fatal(err)
	}
	if f.Anon, err = procStatus(p.cmd.Process.Pid, "RssAnon:"); err != nil {
		tb.Fatal(err)
	}
	return f
}

// loadReleases returns the lines of the stopped manager's log that say it
// returned the free heap pages of a large load (procmem.ReleaseAfterLoad).
func (p *scaleDctl) loadReleases() []string {
	var lines []string
	for _, l := range strings.Split(p.logs.String(), "\n") {
		if strings.Contains(l, "free heap pages") {
			lines = append(lines, l)
		}
	}
	return lines
}

// traceLatency starts, with DCTL_BENCH_PPROF_DIR set, a 5 s execution
// trace of the manager (trace-latency.out there, for `go tool trace`:
// what a slow change waited for) and returns a function that waits until
// it is saved; without the variable both do nothing.
func (p *scaleDctl) traceLatency(tb testing.TB) func() {
	tb.Helper()
	if os.Getenv(benchPprofDirEnv) == "" {
		return func() {}
	}
	done := make(chan error, 1)
	go func() { done <- savePprof(p.pprof, "/debug/pprof/trace?seconds=5", "trace-latency.out") }()
	return func() {
		if err := <-done; err != nil {
			tb.Errorf("trace of the latency changes: %v", err)
		}
	}
}

func (p *scaleDctl) stop(tb testing.TB) {
	select {
	case err := <-p.exited:
		p.exited <- err
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		tb.Errorf("dctl start did not stop within 30s of SIGTERM\n%s", p.logs)
	}
}

// arrivals records when a watch first delivered each (name, gen label)
// pair, and lets a waiter block until a pair arrives.
type arrivals struct {
	mu   sync.Mutex
	cond *sync.Cond
	at   map[string]time.Time
	// views holds the latest gen, image, phase and podIP of each view (the
	// view watch only), to check the content.
	views map[string]scaleView
	err   error
}

type scaleView struct{ gen, app, image, phase, podIP string }

func newArrivals() *arrivals {
	a := &arrivals{at: map[string]time.Time{}, views: map[string]scaleView{}}
	a.cond = sync.NewCond(&a.mu)
	return a
}

func (a *arrivals) record(name, gen string, v *scaleView) {
	now := time.Now()
	a.mu.Lock()
	k := name + "/" + gen
	if _, ok := a.at[k]; !ok {
		a.at[k] = now
	}
	if v != nil {
		a.views[name] = *v
	}
	a.mu.Unlock()
	a.cond.Broadcast()
}

func (a *arrivals) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.cond.Broadcast()
}

// wait returns when name/gen arrived, or an error after timeout or when
// the watch failed.
func (a *arrivals) wait(name, gen string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, a.cond.Broadcast)
	defer t.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		if at, ok := a.at[name+"/"+gen]; ok {
			return at, nil
		}
		if a.err != nil {
			return time.Time{}, a.err
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s with gen %s not seen within %s", name, gen, timeout)
		}
		a.cond.Wait()
	}
}

// count is the number of views seen.
func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.views)
}

// watchViews watches the ScalePod views of ns through dctl's view API
// server (plain HTTP, development mode), retrying while the kind is not
// served yet and reopening the watch (with the initial events again) when
// it ends, until ctx ends. Each ADDED or MODIFIED event is recorded.
func watchViews(ctx context.Context, api, ns string, a *arrivals) {
	url := "http://" + api + "/apis/scale.view.dcontroller.io/v1alpha1/namespaces/" + ns + "/scalepods?watch=true"
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			time.Sleep(50 * time.Millisecond)
			continue
		}
		dec := json.NewDecoder(resp.Body)
		for {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Metadata struct {
						Name   string            `json:"name"`
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
					Spec struct {
						Image string `json:"image"`
						Phase string `json:"phase"`
						PodIP string `json:"podIP"`
					} `json:"spec"`
				} `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				break
			}
			if ev.Type != "ADDED" && ev.Type != "MODIFIED" {
				continue
			}
			o := ev.Object
			a.record(o.Metadata.Name, o.Metadata.Labels["gen"], &scaleView{gen: o.Metadata.Labels["gen"], app: o.Metadata.Labels["app"],
				image: o.Spec.Image, phase: o.Spec.Phase, podIP: o.Spec.PodIP})
		}
		resp.Body.Close()
	}
}

// watchPods watches the pods of ns on the API server from resourceVersion
// rv, recording each change's gen label, until ctx ends.
func watchPods(ctx context.Context, cs kubernetes.Interface, ns, rv string, a *arrivals) {
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		a.fail(fmt.Errorf("watching pods: %w", err))
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			a.record(p.Name, p.Labels["gen"], nil)
		}
	}
	if ctx.Err() == nil {
		a.fail(fmt.Errorf("the pod watch ended"))
	}
}

// scaleResult is one scale measurement at N pods.
type scaleResult struct {
	n        int
	podBytes int // mean JSON size of a pod as listed, managedFields dropped
	create   time.Duration
	// unstructured and typed are the informer children's figures.
	unstructured, typed scaleFigures
	// dctl: before is the idle manager (no Operator), after the steady state
	// with every view present; Sync is from creating the Operator to the
	// last of the N views seen on a watch of the view API server.
	dctl scaleFigures
	// viewLatency and podLatency are, per change, patch return → the view's
	// watch event and → the API server's pod watch event (negative when the
	// event came before the patch's response was read); overLatency is the
	// view's event after the pod's.
	viewLatency, podLatency, overLatency []time.Duration
	// latencyFrom and latencyTo bound the latency changes (wall clock),
	// and released are dctl's log lines of returning the free heap pages
	// of the initial load (each with its time): one that falls between
	// them explains a slow change.
	latencyFrom, latencyTo time.Time
	released               []string
	// views is each view's content at the end of the sync.
	views map[string]scaleView
}

// measureScale creates n pods in a namespace of its own and measures them
// (see scaleResult); the namespace is deleted at the end.
func measureScale(tb testing.TB, n int) *scaleResult {
	tb.Helper()
	ctx := context.Background()
	// Protocol buffers for the bulk writes and the pod watch: less of the
	// API server's CPU than JSON (the machine is shared with it).
	pcfg := unthrottled()
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(pcfg)
	if err != nil {
		tb.Fatal(err)
	}
	r := &scaleResult{n: n}
	ns := fmt.Sprintf("scale-%d-%d", n, time.Now().UnixNano()%1_000_000)
	start := time.Now()
	tb.Cleanup(func() {
		t0 := time.Now()
		deleteScaleNamespace(tb, cs, ns, n)
		tb.Logf("deleting the %d pods took %s", n, time.Since(t0).Round(time.Millisecond))
	})
	createScalePods(tb, cs, ns, n)
	r.create = time.Since(start)

	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 100})
	if err != nil {
		tb.Fatal(err)
	}
	size := 0
	for i := range l.Items {
		l.Items[i].ManagedFields = nil
		b, _ := json.Marshal(&l.Items[i])
		size += len(b)
	}
	r.podBytes = size / max(len(l.Items), 1)

	progress("caching the %d pods in a bare informer of unstructured objects", n)
	r.unstructured = runInformerChild(tb, "unstructured", ns)
	progress("caching them in a bare informer of typed objects")
	r.typed = runInformerChild(tb, "typed", ns)
	progress("starting dctl")

	// The start-up pages are released 1s after the caches' sync, before
	// the idle figure (as BenchmarkScaleComposite's), not while the
	// Operator syncs or its changes run: read before that release, the
	// idle figure held pages of the executable that the release then
	// took from the figure after the sync (the idle RSS read 60 MiB
	// instead of 26 in one run at 10k, and RSS per pod 0.85x the
	// informer's instead of 1.12x).
	p := startScaleDctl(tb, "--release-startup-pages-after=1s")
	time.Sleep(2 * time.Second)
	r.dctl.Before = p.memory(tb)
	views := newArrivals()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	op := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(strings.Replace(scaleOperator, "namespace: NS", "namespace: "+ns, 1)), &op.Object); err != nil {
		tb.Fatal(err)
	}
	progress("creating the Operator: a view of each of the %d pods", n)
	opStart := time.Now()
	if err := k8sClient.Create(ctx, op); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = k8sClient.Delete(context.Background(), op) })
	go watchViews(wctx, p.api, ns, views)
	deadline := opStart.Add(time.Duration(n/100+60) * time.Second)
	for views.count() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("%d of %d views after %s\n%s", views.count(), n, time.Since(opStart), p.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.dctl.Sync = time.Since(opStart)
	r.dctl.Objects = views.count()
	progress("%d views after %s; measuring the latency of %d changes", r.dctl.Objects, r.dctl.Sync.Round(time.Millisecond), scaleChanges)
	// Steady state: nothing more to do for the manager.
	time.Sleep(2 * time.Second)
	r.dctl.After = p.memory(tb)
	views.mu.Lock()
	r.views = maps.Clone(views.views)
	views.mu.Unlock()

	// Latency: scaleChanges pods spread over the namespace get a new gen
	// label one at a time.
	pods := newArrivals()
	l, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		tb.Fatal(err)
	}
	go watchPods(wctx, cs, ns, l.ResourceVersion, pods)
	traced := p.traceLatency(tb)
	r.latencyFrom = time.Now()
	for k := range scaleChanges {
		name, gen := scalePodName(k*n/scaleChanges), fmt.Sprintf("g%d", k+1)
		patch := []byte(`{"metadata":{"labels":{"gen":"` + gen + `"}}}`)
		if _, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			tb.Fatal(err)
		}
		ret := time.Now()
		at, err := pods.wait(name, gen, 30*time.Second)
		if err != nil {
			tb.Fatalf("pod watch: %v", err)
		}
		r.podLatency = append(r.podLatency, at.Sub(ret))
		vat, err := views.wait(name, gen, 30*time.Second)
		if err != nil {
			tb.Fatalf("view watch: %v\n%s", err, p.logs)
		}
		r.viewLatency = append(r.viewLatency, vat.Sub(ret))
		r.overLatency = append(r.overLatency, vat.Sub(at))
	}
	r.latencyTo = time.Now()
	traced()
	cancel()
	p.stop(tb)
	r.released = p.loadReleases()
	return r
}

// percentile returns the p-th percentile (0-100, nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// releasedLine says how many times dctl logged returning the free heap
// pages of a large load (procmem.ReleaseAfterLoad, lines as logged, tabs
// made spaces) after what, and the lines; none is explained (a load under
// procmem.LoadReleaseMinObjects objects is not followed by one).
func releasedLine(lines []string, after string) string {
	if len(lines) == 0 {
		return fmt.Sprintf("dctl's releases of free heap pages after %s: none (one follows a load of %d or more objects)", after, procmem.LoadReleaseMinObjects)
	}
	shown := make([]string, len(lines))
	for i, l := range lines {
		shown[i] = strings.Join(strings.Fields(l), " ")
	}
	return fmt.Sprintf("dctl's releases of free heap pages after %s: %d: %s", after, len(lines), strings.Join(shown, "; "))
}

// logTime is the layout of the times dctl's log lines start with, so that
// the latency window reads next to them.
const logTime = "2006-01-02T15:04:05.000Z07:00"

// table formats the result for the log.
func (r *scaleResult) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pods of %d B (JSON, no managedFields), created in %s; per pod = (after sync - before the list) / N, after a forced GC, in bytes\n",
		r.n, r.podBytes, r.create.Round(time.Millisecond))
	fmt.Fprintf(&b, "%-22s %12s %12s %12s %12s %10s\n", "", "heapInuse/pod", "heapAlloc/pod", "RSS/pod", "RssAnon/pod", "sync")
	row := func(name string, f scaleFigures) {
		po := f.perObject()
		fmt.Fprintf(&b, "%-22s %12d %12d %12d %12d %10s\n", name, po.HeapInuse, po.HeapAlloc, po.RSS, po.Anon, f.Sync.Round(time.Millisecond))
	}
	row("informer unstructured", r.unstructured)
	row("informer typed", r.typed)
	row("dctl start", r.dctl)
	u, d := r.unstructured.perObject(), r.dctl.perObject()
	fmt.Fprintf(&b, "dctl / unstructured informer: heap %.2f, RSS %.2f, RssAnon %.2f\n",
		float64(d.HeapInuse)/float64(u.HeapInuse), float64(d.RSS)/float64(u.RSS), float64(d.Anon)/float64(u.Anon))
	fmt.Fprintf(&b, "dctl totals after sync: RSS %d MiB, RssAnon %d MiB, heapInuse %d MiB (idle: %d, %d, %d MiB)\n",
		r.dctl.After.RSS>>20, r.dctl.After.Anon>>20, r.dctl.After.HeapInuse>>20, r.dctl.Before.RSS>>20, r.dctl.Before.Anon>>20, r.dctl.Before.HeapInuse>>20)
	fmt.Fprintf(&b, "change latency over %d changes (patch return → watch event; negative: the event came first): view p50 %s p99 %s; API server pod watch p50 %s p99 %s; view event after pod event p50 %s p99 %s",
		len(r.viewLatency), percentile(r.viewLatency, 50), percentile(r.viewLatency, 99), percentile(r.podLatency, 50), percentile(r.podLatency, 99),
		percentile(r.overLatency, 50), percentile(r.overLatency, 99))
	slowest := 0
	for i, d := range r.overLatency {
		if d > r.overLatency[slowest] {
			slowest = i
		}
	}
	if len(r.overLatency) > 0 {
		fmt.Fprintf(&b, "\nslowest view event after its pod event: %s, change %d of %d; the changes ran from %s to %s",
			r.overLatency[slowest], slowest+1, len(r.overLatency), r.latencyFrom.UTC().Format(logTime), r.latencyTo.UTC().Format(logTime))
	}
	b.WriteString("\n" + releasedLine(r.released, "the initial load"))
	return b.String()
}

// BenchmarkScale creates DCTL_SCALE_N pods (default 10,000; at least 200)
// of about 1.45 KB of JSON and measures, each in its own process: a
// client-go informer caching them as unstructured objects and one caching
// them as typed core/v1 Pods (both dropping managedFields, as the manager's
// cache does), and `dctl start` with one Operator projecting each pod into
// a view. Memory per pod is the process's figure after the sync minus its
// figure before the pods were listed (the informer child before it starts
// the informer; the manager idle before the Operator is created, its
// start-up pages released first), divided by N, each after a forced GC: Go
// heap in use (dctl through its pprof endpoint), RSS and RssAnon
// (/proc/PID/status). Sync times: the informer's start to HasSynced; the
// Operator's creation to the last view seen on a watch of the view API
// server. Latency over 200 label changes, one at a time: patch return to
// the view's watch event and to the API server's own watch event of the
// pod; the slowest change, when the changes ran and the manager's log line
// of returning a large load's free heap pages are printed with them (and,
// with DCTL_BENCH_PPROF_DIR set, an execution trace of the manager during
// the changes is kept: traceLatency). Run with -benchtime=1x (make
// bench-scale N=...).
func BenchmarkScale(b *testing.B) {
	n, err := scaleCount(scaleChanges, "pods")
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		r := measureScale(b, n)
		b.Logf("\n%s", r.table())
		u, t, d := r.unstructured.perObject(), r.typed.perObject(), r.dctl.perObject()
		b.ReportMetric(float64(d.HeapInuse), "dctl-heap-B/pod")
		b.ReportMetric(float64(d.RSS), "dctl-rss-B/pod")
		b.ReportMetric(float64(d.Anon), "dctl-anon-B/pod")
		b.ReportMetric(float64(u.HeapInuse), "informer-unstructured-heap-B/pod")
		b.ReportMetric(float64(u.RSS), "informer-unstructured-rss-B/pod")
		b.ReportMetric(float64(u.Anon), "informer-unstructured-anon-B/pod")
		b.ReportMetric(float64(t.HeapInuse), "informer-typed-heap-B/pod")
		b.ReportMetric(float64(t.RSS), "informer-typed-rss-B/pod")
		b.ReportMetric(float64(t.Anon), "informer-typed-anon-B/pod")
		b.ReportMetric(float64(d.HeapInuse)/float64(u.HeapInuse), "heap-ratio-dctl/unstructured")
		b.ReportMetric(float64(d.RSS)/float64(u.RSS), "rss-ratio-dctl/unstructured")
		b.ReportMetric(r.dctl.Sync.Seconds(), "dctl-sync-s")
		b.ReportMetric(r.unstructured.Sync.Seconds(), "informer-unstructured-sync-s")
		b.ReportMetric(r.typed.Sync.Seconds(), "informer-typed-sync-s")
		b.ReportMetric(float64(percentile(r.viewLatency, 50).Microseconds()), "dctl-latency-p50-µs")
		b.ReportMetric(float64(percentile(r.viewLatency, 99).Microseconds()), "dctl-latency-p99-µs")
		b.ReportMetric(float64(percentile(r.podLatency, 50).Microseconds()), "apiserver-latency-p50-µs")
		b.ReportMetric(float64(percentile(r.podLatency, 99).Microseconds()), "apiserver-latency-p99-µs")
		b.ReportMetric(float64(percentile(r.overLatency, 50).Microseconds()), "dctl-over-apiserver-p50-µs")
		b.ReportMetric(float64(percentile(r.overLatency, 99).Microseconds()), "dctl-over-apiserver-p99-µs")
	}
}

// TestScaleMeasurementAtTenThousand runs BenchmarkScale's measurement at
// 10,000 pods and checks what it measured, not how fast: every view present
// with its pod's content after the sync, every latency sample observed on
// both watches, and each per-pod figure positive and at least the pod's own
// size (a cached pod cannot take less memory than its JSON).
func TestScaleMeasurementAtTenThousand(t *testing.T) {
	const n = 10_000
	start := time.Now()
	r := measureScale(t, n)
	t.Logf("\n%s", r.table())
	if len(r.views) != n {
		t.Errorf("%d views after the sync, want %d", len(r.views), n)
	}
	for i := range n {
		name := scalePodName(i)
		want := scaleView{gen: "g0", app: fmt.Sprintf("app-%03d", i%100), image: "registry.example.com/main:v1.2", phase: "Running", podIP: scalePodIP(i)}
		if got, ok := r.views[name]; !ok || got != want {
			t.Errorf("view %s: %+v (present %v), want %+v", name, got, ok, want)
			break
		}
	}
	if len(r.viewLatency) != scaleChanges || len(r.podLatency) != scaleChanges || len(r.overLatency) != scaleChanges {
		t.Errorf("%d view and %d pod latency samples, want %d each", len(r.viewLatency), len(r.podLatency), scaleChanges)
	}
	if r.podBytes < 1000 || r.podBytes > 2000 {
		t.Errorf("a pod is %d bytes of JSON, want 1-2 KB", r.podBytes)
	}
	for name, f := range map[string]scaleFigures{"unstructured informer": r.unstructured, "typed informer": r.typed, "dctl": r.dctl} {
		if f.Objects != n {
			t.Errorf("%s: %d objects, want %d", name, f.Objects, n)
		}
		if f.Sync <= 0 {
			t.Errorf("%s: sync time %s", name, f.Sync)
		}
		po := f.perObject()
		for what, v := range map[string]int64{"heap in use": po.HeapInuse, "heap allocated": po.HeapAlloc, "RSS": po.RSS, "RssAnon": po.Anon} {
			if v < int64(r.podBytes) || v > 200<<10 {
				t.Errorf("%s: %s per pod %d B, want between the pod's %d B and 200 KiB", name, what, v, r.podBytes)
			}
		}
	}
	t.Logf("the measurement at %d pods took %s", n, time.Since(start).Round(time.Second))
}
