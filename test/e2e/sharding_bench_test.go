package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The fixed churn of BenchmarkShardingMembers: updates of Pods, of
// parents' specs and of the Operators' source ConfigMaps, shuffled and
// applied by shardBenchWorkers clients as fast as they go.
const (
	shardBenchPodUpdates    = 1500
	shardBenchParentUpdates = 300
	shardBenchSourceUpdates = 300
	shardBenchWorkers       = 8
)

// BenchmarkShardingMembers runs the workload of TestShardingChurnFailover
// (30 whole Operators over ConfigMaps, the namespace-sharded Pod Operator
// over 256 Pods in 128 namespaces, a CompositeController with 600 parents)
// on 1, 2 and 3 `dctl start --sharding` replicas, each time on a fresh
// control plane with the ShardedListAndWatch feature gate on. After the
// first sync it applies the same fixed churn (shardBenchPodUpdates Pod,
// shardBenchParentUpdates parent and shardBenchSourceUpdates source
// updates) and waits until every target reflects the last update. It
// reports, per member, the objects its informers received from the first
// update to convergence (dcontroller_watch_events_total: Pods, and all
// kinds) and the CPU time of its process (/proc/<pid>/stat, seconds), and
// the wall time to converge (seconds from the first update). It checks
// the result against `dctl eval` once at the end. One iteration is the
// whole run: use -benchtime=1x.
func BenchmarkShardingMembers(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for range b.N {
				runShardingMembers(b, n)
			}
		})
	}
}

// shardBenchSample is what one member had received and used at a moment.
type shardBenchSample struct {
	pod, all float64
	cpu      time.Duration
}

func runShardingMembers(b *testing.B, members int) {
	b.StopTimer()
	ctx := context.Background()
	sc := startShardCluster(b, "ShardedListAndWatch=true")
	if !sc.featureEnabled(b, "ShardedListAndWatch") {
		b.Fatal("the kube-apiserver runs without ShardedListAndWatch")
	}
	dir := b.TempDir()
	pods := newShardPods(b)
	for _, ns := range shardWorkloadNamespaces(pods) {
		if err := sc.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	sc.kubectl(b, crdYAML(shardParentKind, "shardparents", "Namespaced"), "apply", "-f", "-")
	sc.kubectl(b, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+shardParentResource)
	syncURL, finalizeURL := shardBenchHook(b, shardSync), shardBenchHook(b, shardFinalize)

	var replicas []*shardReplica
	var ids []string
	b.Cleanup(func() {
		if b.Failed() {
			for _, r := range replicas {
				b.Logf("replica %s (log %s), last lines:\n%s", r.id, r.logPath, r.tail(60))
			}
		}
	})
	for i := range members {
		r := startReplica(b, sc, dir, fmt.Sprintf("m%d", i+1), shardLease, shardRenew, shardRetry)
		replicas = append(replicas, r)
		ids = append(ids, r.id)
	}
	waitFor := func(what string, timeout time.Duration, cond func() string) {
		b.Helper()
		begin := time.Now()
		for {
			for _, r := range replicas {
				if msg := r.alive(); msg != "" {
					b.Fatalf("%s: %s", what, msg)
				}
			}
			msg := cond()
			if msg == "" {
				return
			}
			if time.Since(begin) > timeout {
				b.Fatalf("%s: not within %s: %s", what, timeout, msg)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the members split the buckets", 60*time.Second, func() string {
		h, err := sc.bucketHolders(ctx)
		if err != nil {
			return err.Error()
		}
		return ringBalanced(h, ids)
	})

	// The workload of TestShardingChurnFailover, without deletes.
	opFiles := make([]string, shardOperators)
	for i := range shardOperators {
		opFiles[i] = filepath.Join(dir, shardOpName(i)+".yaml")
		if err := os.WriteFile(opFiles[i], []byte(shardOperatorYAML(i)), 0o600); err != nil {
			b.Fatal(err)
		}
		sc.kubectl(b, "", "apply", "-f", opFiles[i])
	}
	podOpFile := filepath.Join(dir, shardPodOp+".yaml")
	if err := os.WriteFile(podOpFile, []byte(shardPodOpYAML), 0o600); err != nil {
		b.Fatal(err)
	}
	sc.kubectl(b, "", "apply", "-f", podOpFile)
	sc.kubectl(b, fmt.Sprintf(shardCompositeYAML, syncURL, finalizeURL), "apply", "-f", "-")
	rng := rand.New(rand.NewPCG(5866, 1))
	var objs []client.Object
	for i := range shardOperators {
		for k := range shardSrcInitial {
			objs = append(objs, shardSourceObject(i, k, rng.IntN(1000)))
		}
	}
	for n := range shardParents {
		objs = append(objs, shardParentObject(n, rng.IntN(1000)))
	}
	createAll(b, sc.c, append(objs, pods.objects()...))
	waitFor("the first sync", 300*time.Second, func() string { return shardConverged(b, sc, dir, opFiles, podOpFile) })

	read := func() []shardBenchSample {
		out := make([]shardBenchSample, len(replicas))
		for i, r := range replicas {
			ev, err := r.watchEvents()
			if err != nil {
				b.Fatal(err)
			}
			cpu, err := r.cpuTime()
			if err != nil {
				b.Fatal(err)
			}
			out[i] = shardBenchSample{pod: ev["Pod"], cpu: cpu}
			for _, v := range ev {
				out[i].all += v
			}
		}
		return out
	}
	churn := shardBenchChurn(pods)
	before := read()
	b.StartTimer()
	begin := time.Now()
	work := make(chan func(context.Context, client.Client) error)
	errs := make(chan error, shardBenchWorkers)
	var wg sync.WaitGroup
	for range shardBenchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range work {
				if err := op(ctx, sc.c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	func() {
		defer close(work)
		for _, op := range churn {
			select {
			case work <- op:
			case err := <-errs:
				b.Fatalf("churn: %v", err)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("churn: %v", err)
	}
	churned := time.Since(begin)
	waitFor("convergence after the churn", 300*time.Second, func() string { return shardQuickConverged(ctx, sc) })
	converged := time.Since(begin)
	b.StopTimer()
	after := read()
	if msg := shardConverged(b, sc, dir, opFiles, podOpFile); msg != "" {
		b.Fatalf("after the churn, the targets differ from dctl eval's: %s", msg)
	}

	var cpuTotal, podMax float64
	for i, r := range replicas {
		pod, all := after[i].pod-before[i].pod, after[i].all-before[i].all
		cpu := (after[i].cpu - before[i].cpu).Seconds()
		b.ReportMetric(pod, "pod-events-"+r.id)
		b.ReportMetric(all, "events-"+r.id)
		b.ReportMetric(cpu, "cpu-s-"+r.id)
		cpuTotal += cpu
		podMax = max(podMax, pod)
		b.Logf("member %s: %.0f Pod and %.0f objects received in all, %.2fs CPU", r.id, pod, all, cpu)
	}
	b.ReportMetric(podMax, "pod-events-max")
	b.ReportMetric(cpuTotal, "cpu-s-total")
	b.ReportMetric(churned.Seconds(), "churn-s")
	b.ReportMetric(converged.Seconds(), "converge-s")
	b.Logf("%d members: %d updates applied in %s, converged %s after the first", members, len(churn), churned.Round(time.Millisecond), converged.Round(time.Millisecond))
}

// shardBenchHook serves fn as a Metacontroller hook (JSON request and
// response) until the benchmark ends, and returns its URL.
func shardBenchHook(b *testing.B, fn func(map[string]any) any) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(fn(req))
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// shardBenchChurn returns the fixed churn, shuffled with a fixed seed: each
// update writes a new value (JSON merge patches: no conflicts), so each is
// one change that the targets must show.
func shardBenchChurn(pods *shardPods) []func(context.Context, client.Client) error {
	rng := rand.New(rand.NewPCG(5866, 2))
	var value atomic.Int64
	var ops []func(context.Context, client.Client) error
	for range shardBenchPodUpdates {
		ns, k, tier := pods.namespaces[rng.IntN(len(pods.namespaces))], rng.IntN(shardPodsPerNS), rng.IntN(4)
		ops = append(ops, func(ctx context.Context, c client.Client) error { return pods.patch(ctx, c, ns, k, tier) })
	}
	for range shardBenchParentUpdates {
		ns, name := shardParent(rng.IntN(shardParents))
		ops = append(ops, func(ctx context.Context, c client.Client) error {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(shardParentAPIVersion)
			u.SetKind(shardParentKind)
			u.SetNamespace(ns)
			u.SetName(name)
			patch := fmt.Sprintf(`{"spec":{"value":"b%d"}}`, value.Add(1))
			return c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
		})
	}
	for range shardBenchSourceUpdates {
		ns, name := shardSource(rng.IntN(shardOperators), rng.IntN(shardSrcInitial))
		ops = append(ops, func(ctx context.Context, c client.Client) error {
			cm := &corev1.ConfigMap{}
			cm.Namespace, cm.Name = ns, name
			patch := fmt.Sprintf(`{"data":{"v":"b%d"}}`, value.Add(1))
			return c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(patch)))
		})
	}
	rng.Shuffle(len(ops), func(i, j int) { ops[i], ops[j] = ops[j], ops[i] })
	return ops
}

// shardQuickConverged returns "" when every target shows its source's
// current state: each Pod's ConfigMap its tier and rev, each source's copy
// its v, each parent's child and status its spec.value; else the first
// difference. It reads three lists and runs no `dctl eval`, so it can be
// polled often while measuring.
func shardQuickConverged(ctx context.Context, sc *shardCluster) string {
	cms := &corev1.ConfigMapList{}
	if err := sc.c.List(ctx, cms); err != nil {
		return err.Error()
	}
	byKey := map[string]*corev1.ConfigMap{}
	for i := range cms.Items {
		cm := &cms.Items[i]
		byKey[cm.Namespace+"/"+cm.Name] = cm
	}
	for _, cm := range cms.Items {
		if _, ok := cm.Labels["op"]; !ok {
			continue
		}
		key := cm.Namespace + "/" + cm.Name + "-out"
		if out := byKey[key]; out == nil || out.Data["v"] != cm.Data["v"] {
			return fmt.Sprintf("%s does not show v=%q of its source", key, cm.Data["v"])
		}
	}
	pods := &corev1.PodList{}
	if err := sc.c.List(ctx, pods); err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		key := p.Namespace + "/" + p.Name + "-pod"
		if out := byKey[key]; out == nil || out.Data["rev"] != p.Annotations["rev"] || out.Data["tier"] != p.Labels["tier"] {
			return fmt.Sprintf("%s does not show rev %q and tier %q of its Pod", key, p.Annotations["rev"], p.Labels["tier"])
		}
	}
	pl := &unstructured.UnstructuredList{}
	pl.SetAPIVersion(shardParentAPIVersion)
	pl.SetKind(shardParentKind + "List")
	if err := sc.c.List(ctx, pl); err != nil {
		return err.Error()
	}
	for _, p := range pl.Items {
		value, _, _ := unstructured.NestedString(p.Object, "spec", "value")
		st, _, _ := unstructured.NestedString(p.Object, "status", "value")
		key := p.GetNamespace() + "/" + p.GetName()
		if child := byKey[key+"-child"]; child == nil || child.Data["value"] != value || st != value {
			return fmt.Sprintf("parent %s: spec.value %q not yet in its child and status (%q)", key, value, st)
		}
	}
	return ""
}
