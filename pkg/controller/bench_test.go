package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/dcontroller/dcontroller/internal/cputime"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// Benchmarks of what one source change costs a user, through the
// controller layer: after loading N pods (N in 1k, 10k, 100k), one pod's
// status.podIP changes, which changes the output; the change goes through
// HandleBatch as the operator runtime sends it (the object as read from
// the informer cache, see cacheRead), through the pipeline, the fold of the
// output into the controller's state and the target write, which reaches a
// fake writer (no API server is measured). Run with
//
//	go test ./pkg/controller -run '^$' -bench Change -benchtime=300000x
//
// They report the process CPU time per change (ns/change, GC included) and
// the heap allocations per change (allocs/change).

var benchSizes = []int{1_000, 10_000, 100_000}

var (
	benchPodGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	benchDepGVK    = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Dep"}
	benchTargetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "PodInfo"}
)

// cacheRead is what the operator runtime does to the object it reads from
// the informer cache before it hands it to HandleBatch (see
// operator.Runtime's latest): nothing, HandleBatch takes the cache's own
// object (it was a deep copy, 13 µs of a 1 KB pod's change on the
// reference machine).
func cacheRead(u *unstructured.Unstructured) *unstructured.Unstructured { return u }

// benchPod returns pod i of about 1KB of JSON, with its own maps (as the
// informer cache holds decoded objects): labels, annotations, two
// containers, a status with conditions. parents is the number of parents
// (spec.parent, the app label) the pods are spread over; ip picks the
// status.podIP version.
func benchPod(i, parents, ip int) *unstructured.Unstructured {
	app := "app-" + strconv.Itoa(i%parents)
	container := func(name string, port int64) map[string]any {
		return map[string]any{
			"name":      name,
			"image":     "registry.example.com/" + name + ":v1.2",
			"ports":     []any{map[string]any{"containerPort": port, "protocol": "TCP"}},
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}},
		}
	}
	cond := func(t string) map[string]any {
		return map[string]any{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"}
	}
	podIP := fmt.Sprintf("10.%d.%d.%d", ip, i>>8&255, i&255)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":              fmt.Sprintf("%s-7d9f8c6b5-%06d", app, i),
			"namespace":         "default",
			"uid":               fmt.Sprintf("5f1c2d3e-0000-4000-8000-%012d", i),
			"resourceVersion":   strconv.Itoa(1000 + 2*i + ip),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":            map[string]any{"app": app, "pod-template-hash": "7d9f8c6b5", "tier": "web"},
			"annotations":       map[string]any{"kubernetes.io/psp": "restricted", "example.com/team": "payments"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app + "-7d9f8c6b5", "uid": "rs-uid", "controller": true,
			}},
		},
		"spec": map[string]any{
			"parent":        app,
			"containers":    []any{container("main", 8080), container("sidecar", 9090)},
			"restartPolicy": "Always",
			"nodeName":      "node-" + strconv.Itoa(i%50),
		},
		"status": map[string]any{
			"phase":      "Running",
			"conditions": []any{cond("Ready"), cond("ContainersReady")},
			"podIP":      podIP,
			"podIPs":     []any{map[string]any{"ip": podIP}},
			"hostIP":     "192.168.0.1",
		},
	}}
}

func TestBenchPodSize(t *testing.T) {
	b, err := json.Marshal(benchPod(99_999, 10_000, 1).Object)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 900 || len(b) > 1300 {
		t.Fatalf("benchmark pod is %d bytes of JSON, want about 1KB", len(b))
	}
}

// fakeWriter is a Client over a map of the target objects: writes are kept
// as they are sent, reads return the kept objects (as the operator's client
// returns the informer cache's own objects).
type fakeWriter struct {
	objs   map[object.Key]*unstructured.Unstructured
	writes int
}

func newFakeWriter() *fakeWriter {
	return &fakeWriter{objs: map[object.Key]*unstructured.Unstructured{}}
}

func keyOf(u *unstructured.Unstructured) object.Key {
	return object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}
}

func (f *fakeWriter) Get(_ context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	u, ok := f.objs[key]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	return u, nil
}

func (f *fakeWriter) List(context.Context, schema.GroupVersionKind) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(f.objs))
	for _, u := range f.objs {
		out = append(out, u.DeepCopy())
	}
	return out, nil
}

func (f *fakeWriter) Create(_ context.Context, u *unstructured.Unstructured) error {
	f.writes++
	f.objs[keyOf(u)] = u
	return nil
}

func (f *fakeWriter) Update(_ context.Context, u *unstructured.Unstructured) error {
	f.writes++
	f.objs[keyOf(u)] = u
	return nil
}

func (f *fakeWriter) Patch(context.Context, schema.GroupVersionKind, object.Key, []byte) error {
	return fmt.Errorf("the benchmark writer does not patch")
}

func (f *fakeWriter) Apply(context.Context, *unstructured.Unstructured, string) error {
	return fmt.Errorf("the benchmark writer does not apply")
}

func (f *fakeWriter) UpdateStatus(context.Context, *unstructured.Unstructured) error {
	return fmt.Errorf("the benchmark writer has no status subresource")
}

func (f *fakeWriter) PatchStatus(context.Context, schema.GroupVersionKind, object.Key, []byte) error {
	return fmt.Errorf("the benchmark writer has no status subresource")
}

func (f *fakeWriter) ApplyStatus(context.Context, *unstructured.Unstructured, string) error {
	return fmt.Errorf("the benchmark writer has no status subresource")
}

func (f *fakeWriter) Delete(_ context.Context, _ schema.GroupVersionKind, key object.Key) error {
	f.writes++
	delete(f.objs, key)
	return nil
}

const benchSelectProject = `
name: pod-info
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  - "@select": {"@eq": ["$.metadata.labels.tier", "web"]}
  - "@project":
      metadata:
        name: $.metadata.name
        namespace: $.metadata.namespace
        labels: {app: $.metadata.labels.app}
      spec: {podIP: $.status.podIP, node: $.spec.nodeName}
target: {apiGroup: example.com, version: v1, kind: PodInfo}
`

const benchJoin = `
name: pod-parent
sources:
  - {apiGroup: "", version: v1, kind: Pod}
  - {apiGroup: example.com, version: v1, kind: Dep}
pipeline:
  - "@join": {"@eq": ["$.Pod.spec.parent", "$.Dep.metadata.name"]}
  - "@project":
      metadata: {name: $.Pod.metadata.name, namespace: $.Pod.metadata.namespace}
      spec: {podIP: $.Pod.status.podIP, parent: $.Dep.metadata.name, replicas: $.Dep.spec.replicas}
target: {apiGroup: example.com, version: v1, kind: PodInfo}
`

const benchGather = `
name: parent-ips
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  - "@project":
      metadata: {name: $.spec.parent, namespace: $.metadata.namespace}
      spec: {podIPs: $.status.podIP}
  - "@gather": ["$.metadata.name", "$.spec.podIPs"]
target: {apiGroup: example.com, version: v1, kind: PodInfo}
`

// benchWindow bounds the pods whose second version is built before the
// timer starts; the changes cycle through them.
const benchWindow = 1000

// runChanges loads n pods (spread over parents) and the extra objects into
// a controller of spec y, then times one pod change per iteration: the pod's
// status.podIP flips between two versions.
func runChanges(b *testing.B, y string, n, parents int, extra []*unstructured.Unstructured) {
	ctx := context.Background()
	w := newFakeWriter()
	c, err := New(spec(b, y), Options{Operator: "bench", Client: w})
	if err != nil {
		b.Fatal(err)
	}
	load := make([]Change, 0, n+len(extra))
	for _, u := range extra {
		load = append(load, Change{New: u})
	}
	k := min(benchWindow, n)
	versions := make([][2]*unstructured.Unstructured, k)
	for i := 0; i < n; i++ {
		p := benchPod(i, parents, 0)
		if i < k {
			versions[i] = [2]*unstructured.Unstructured{p, benchPod(i, parents, 1)}
		}
		load = append(load, Change{New: p})
	}
	if err := c.HandleBatch(ctx, load); err != nil {
		b.Fatal(err)
	}
	load = nil
	if len(w.objs) == 0 {
		b.Fatal("loading wrote no target object")
	}
	cur := make([]int, k)
	batch := make([]Change, 1)
	runtime.GC() // the loading garbage is not the changes' cost
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	writes := w.writes
	start, _ := cputime.Process()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % k
		cur[j] ^= 1
		batch[0] = Change{New: cacheRead(versions[j][cur[j]])}
		if err := c.HandleBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	end, ok := cputime.Process()
	runtime.ReadMemStats(&ms1)
	if got := w.writes - writes; got != b.N {
		b.Fatalf("%d changes made %d writes, want one each", b.N, got)
	}
	if ok {
		b.ReportMetric(float64(end-start)/float64(b.N), "ns/change")
	}
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/change")
}

func BenchmarkChangeSelectProject(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			runChanges(b, benchSelectProject, n, max(n/10, 1), nil)
		})
	}
}

func BenchmarkChangeJoin(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			parents := max(n/10, 1)
			deps := make([]*unstructured.Unstructured, parents)
			for i := range deps {
				d := &unstructured.Unstructured{Object: map[string]any{
					"spec": map[string]any{"replicas": int64(10), "template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "app-" + strconv.Itoa(i)}}}},
				}}
				d.SetGroupVersionKind(benchDepGVK)
				d.SetNamespace("default")
				d.SetName("app-" + strconv.Itoa(i))
				deps[i] = d
			}
			runChanges(b, benchJoin, n, parents, deps)
		})
	}
}

func BenchmarkChangeGather(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			runChanges(b, benchGather, n, max(n/10, 1), nil)
		})
	}
}

// BenchmarkHeapPerPod measures the heap a controller adds to the pods an
// informer cache holds: the pods are built (the cache's objects), then
// loaded into a controller; it reports the heap of the pods alone
// (cache-B/pod) and of pods and controller together (manager-B/pod), per
// pod, and their ratio. Run with
//
//	go test ./pkg/controller -run '^$' -bench HeapPerPod -benchtime=1x
func BenchmarkHeapPerPod(b *testing.B) {
	const n = 10_000
	for _, bc := range []struct{ name, spec string }{
		{"SelectProject", benchSelectProject}, {"Join", benchJoin}, {"Gather", benchGather},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				base := heapInUse()
				var cache []*unstructured.Unstructured
				for j := 0; j < n; j++ {
					cache = append(cache, decoded(b, benchPod(j, n/10, 0)))
				}
				for j := 0; j < n/10; j++ {
					d := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(10)}}}
					d.SetGroupVersionKind(benchDepGVK)
					d.SetNamespace("default")
					d.SetName("app-" + strconv.Itoa(j))
					cache = append(cache, decoded(b, d))
				}
				cached := heapInUse() - base
				c, err := New(spec(b, bc.spec), Options{Operator: "bench", Client: newFakeWriter()})
				if err != nil {
					b.Fatal(err)
				}
				changes := make([]Change, len(cache))
				for j, u := range cache {
					changes[j] = Change{New: cacheRead(u)}
				}
				if err := c.HandleBatch(context.Background(), changes); err != nil {
					b.Fatal(err)
				}
				changes = nil
				// The written target objects are the API server's and
				// its cache's, not the controller's: they go.
				c.opts.Client = nil
				total := heapInUse() - base
				b.ReportMetric(float64(cached)/n, "cache-B/pod")
				b.ReportMetric(float64(total)/n, "manager-B/pod")
				b.ReportMetric(float64(total)/float64(cached), "ratio")
				runtime.KeepAlive(cache)
				runtime.KeepAlive(c)
			}
		})
	}
}

// decoded returns u as an informer cache holds it: decoded from the JSON
// an API server sends (every string its own allocation), with the JSON
// rules of client-go's decoders (sigs.k8s.io/json: integers as int64).
func decoded(b *testing.B, u *unstructured.Unstructured) *unstructured.Unstructured {
	data, err := json.Marshal(u.Object)
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		b.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
