package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"strconv"
	"testing"

	"github.com/dcontroller/dcontroller/internal/cputime"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// Benchmarks of the project's performance targets: the cost of one object
// update (delete old + insert new) processed incrementally after loading N
// objects, for N in {1k, 10k, 100k}. Run with
//
//	go test ./pkg/pipeline -run '^$' -bench 'SelectProject|Join|Gather' -benchmem -benchtime=2000x
//	go test ./pkg/pipeline -run '^$' -bench Recompute10k -benchmem -benchtime=20x
//
// Besides wall time (ns/op) they report the process CPU time per operation
// (cpu-ns/op, GC included), which is the steadier figure on a shared
// machine.

var sizes = []int{1_000, 10_000, 100_000}

// benchSpec returns the template spec and status shared by the pods of one
// "deployment", as real pods of a ReplicaSet share them; sharing keeps the
// benchmark's memory small but not the work, as every walk is per pod.
func benchSpec(app string) (map[string]any, map[string]any) {
	container := func(name string, port int64) map[string]any {
		return map[string]any{
			"name":            name,
			"image":           "registry.example.com/team/" + app + "-" + name + ":v1.2.3",
			"imagePullPolicy": "IfNotPresent",
			"ports":           []any{map[string]any{"containerPort": port, "protocol": "TCP", "name": "http"}},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
				"limits":   map[string]any{"cpu": "500m", "memory": "256Mi"},
			},
			"env": []any{
				map[string]any{"name": "APP", "value": app},
				map[string]any{"name": "LOG_LEVEL", "value": "info"},
			},
		}
	}
	spec := map[string]any{
		"containers":         []any{container("main", 8080), container("sidecar", 9090)},
		"restartPolicy":      "Always",
		"serviceAccountName": "default",
		"dnsPolicy":          "ClusterFirst",
		"volumes":            []any{map[string]any{"name": "config", "configMap": map[string]any{"name": app + "-config"}}},
	}
	status := map[string]any{
		"phase": "Running",
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": "ContainersReady", "status": "True"},
		},
	}
	return spec, status
}

// benchPod builds a pod of about 1KB of JSON; groups is the number of apps
// (parents) the pods are spread over.
func benchPod(i, groups int, shared [][2]map[string]any) dbsp.Document {
	app := "app-" + strconv.Itoa(i%groups)
	st := shared[i%len(shared)]
	managed := "true"
	if i%10 == 9 {
		managed = "false"
	}
	return dbsp.Document{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":              fmt.Sprintf("%s-7d9f8c6b5-%05d", app, i),
			"namespace":         "default",
			"uid":               fmt.Sprintf("5f1c2d3e-0000-4000-8000-%012d", i),
			"resourceVersion":   strconv.Itoa(1000 + i),
			"creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":            map[string]any{"app": app, "pod-template-hash": "7d9f8c6b5", "dcontroller.io/managed": managed},
			"annotations":       map[string]any{"kubernetes.io/psp": "restricted"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app + "-7d9f8c6b5", "uid": "rs-uid", "controller": true,
			}},
		},
		"spec": st[0],
		"status": map[string]any{
			"phase": st[1]["phase"], "conditions": st[1]["conditions"],
			"podIP": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "hostIP": "192.168.0.1",
		},
	}
}

// bumped returns a new version of a pod: resourceVersion and an annotation
// changed, the rest shared.
func bumped(pod dbsp.Document, v int) dbsp.Document {
	out := maps.Clone(pod)
	md := maps.Clone(pod["metadata"].(map[string]any))
	md["resourceVersion"] = strconv.Itoa(v)
	md["annotations"] = map[string]any{"kubernetes.io/psp": "restricted", "example.com/revision": strconv.Itoa(v)}
	out["metadata"] = md
	return out
}

func benchPods(n, groups int) []dbsp.Document {
	shared := make([][2]map[string]any, 0, 10)
	for i := 0; i < 10; i++ {
		s, st := benchSpec("app-" + strconv.Itoa(i))
		shared = append(shared, [2]map[string]any{s, st})
	}
	pods := make([]dbsp.Document, n)
	for i := range pods {
		pods[i] = benchPod(i, groups, shared)
	}
	return pods
}

func TestBenchPodSize(t *testing.T) {
	b, err := json.Marshal(benchPods(1, 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 900 || len(b) > 1600 {
		t.Fatalf("benchmark pod is %d bytes of JSON, want about 1KB", len(b))
	}
}

const selectProjectSpec = `[
	{"@select": {"@eq": ["$.metadata.labels[\"dcontroller.io/managed\"]", "true"]}},
	{"@project": {
		"metadata": {
			"name": "$.metadata.name",
			"namespace": "$.metadata.namespace",
			"labels": {"app": "$.metadata.labels.app"},
			"annotations": {
				"dcontroller.io/container-num": {"@string": {"@len": "$.spec.containers"}},
				"dcontroller.io/pod-ip": "$.status.podIP"
			}
		}
	}}
]`

const joinSpec = `[
	{"@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Svc.spec.selector.app"]}},
	{"@project": {
		"metadata": {
			"name": {"@concat": ["$.Svc.metadata.name", "-", "$.Pod.metadata.name"]},
			"namespace": "$.Pod.metadata.namespace"
		},
		"spec": {"podIP": "$.Pod.status.podIP", "service": "$.Svc.metadata.name"}
	}}
]`

const gatherSpec = `{"@gather": ["$.metadata.labels.app", "$.status.podIP"]}`

// window bounds the pods that the update loop cycles through, so that the
// alternative versions can be built before the timer starts.
const window = 1000

// runUpdates loads pods into p, then times one pod update per iteration.
func runUpdates(b *testing.B, p *Pipeline, kind string, pods []dbsp.Document, extra map[string]*dbsp.ZSet) {
	load := map[string]*dbsp.ZSet{kind: dbsp.FromDocuments(pods...)}
	maps.Copy(load, extra)
	if _, err := p.Process(load); err != nil {
		b.Fatal(err)
	}
	k := min(window, len(pods))
	versions := make([][2]dbsp.Document, k)
	for j := range versions {
		versions[j] = [2]dbsp.Document{pods[j], bumped(pods[j], 1_000_000+j)}
	}
	cur := make([]int, k)
	deltas := make([]*dbsp.ZSet, 0, 2*k)
	for i := 0; i < 2*k; i++ { // every update and its reversal, precomputed
		j := i % k
		d := dbsp.NewZSet()
		d.Insert(versions[j][cur[j]], -1)
		cur[j] ^= 1
		d.Insert(versions[j][cur[j]], 1)
		deltas = append(deltas, d)
	}
	in := map[string]*dbsp.ZSet{}
	runtime.GC() // do not time the collection of the loading garbage
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := 0; i < b.N; i++ {
		in[kind] = deltas[i%len(deltas)]
		if _, err := p.Process(in); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU starts measuring the process CPU time (GC included); the
// returned function reports it per operation as the cpu-ns/op metric.
func reportCPU(b *testing.B) func() {
	start, ok := cputime.Process()
	return func() {
		if end, ok2 := cputime.Process(); ok && ok2 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func compileBench(b *testing.B, spec string, sources ...string) *Pipeline {
	p, err := Compile(mustJSON(b, spec), sources, Options{Path: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkSelectProject(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			pods := benchPods(n, max(n/10, 1))
			runUpdates(b, compileBench(b, selectProjectSpec, "Pod"), "Pod", pods, nil)
		})
	}
}

func BenchmarkJoin(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			parents := max(n/10, 1)
			pods := benchPods(n, parents)
			svcs := dbsp.NewZSet()
			for i := 0; i < parents; i++ {
				svcs.Insert(dbsp.Document{
					"apiVersion": "v1", "kind": "Service",
					"metadata": map[string]any{"name": "svc-" + strconv.Itoa(i), "namespace": "default"},
					"spec": map[string]any{
						"selector": map[string]any{"app": "app-" + strconv.Itoa(i)},
						"ports":    []any{map[string]any{"port": int64(80), "targetPort": int64(8080)}},
					},
				}, 1)
			}
			runUpdates(b, compileBench(b, joinSpec, "Pod", "Svc"), "Pod", pods, map[string]*dbsp.ZSet{"Svc": svcs})
		})
	}
}

func BenchmarkGather(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			pods := benchPods(n, max(n/10, 1))
			runUpdates(b, compileBench(b, gatherSpec, "Pod"), "Pod", pods, nil)
		})
	}
}

// BenchmarkRecompute10k is the snapshot twin of BenchmarkSelectProject at
// N=10k: Evaluate on the whole collection, as a non-incremental controller
// would on every change.
func BenchmarkRecompute10k(b *testing.B) {
	p := compileBench(b, selectProjectSpec, "Pod")
	state := map[string]*dbsp.ZSet{"Pod": dbsp.FromDocuments(benchPods(10_000, 1_000)...)}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for i := 0; i < b.N; i++ {
		if _, err := p.Evaluate(state); err != nil {
			b.Fatal(err)
		}
	}
}
