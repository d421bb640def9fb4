package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// The ring of TestShardingChurnFailover and its workload.
const (
	shardNamespace = "dcontroller-system"

	shardLease = 6 * time.Second
	shardRenew = 4 * time.Second
	shardRetry = 1 * time.Second

	shardOperators  = 30
	shardSrcInitial = 4   // source ConfigMaps per Operator at first
	shardSrcSlots   = 6   // source names per Operator the churn uses
	shardParents    = 600 // hook parents at first

	shardPodNSPerBucket = 2 // namespaces of Pods per bucket: 128
	shardPodsPerNS      = 2
	// shardPodWindow is how long the Pods alone are churned while the
	// members' Pod watch events are counted.
	shardPodWindow = 5 * time.Second
	// shardPodShareMax bounds a member's share of the Pod watch events
	// with three members when the API server filters by namespace.
	shardPodShareMax = 1.0/3 + 0.10

	shardChurnFor = 24 * time.Second
	shardKillAt   = 7 * time.Second  // into the churn
	shardJoinAt   = 15 * time.Second // into the churn
)

// shardParentGVK is the hook controller's parent kind (a CRD of the test).
const (
	shardParentAPIVersion = "e2e.dcontroller.io/v1"
	shardParentKind       = "ShardParent"
	shardParentResource   = "shardparents.e2e.dcontroller.io"
)

func shardOpName(i int) string { return fmt.Sprintf("shard-op-%02d", i) }

// shardSource is source k of Operator i: namespace and name.
func shardSource(i, k int) (string, string) {
	return fmt.Sprintf("shard-src-%d", k%3), fmt.Sprintf("s%02d-%d", i, k)
}

// shardParent is parent n: namespace and name.
func shardParent(n int) (string, string) {
	return fmt.Sprintf("shard-par-%d", n%3), fmt.Sprintf("p-%04d", n)
}

// shardOperatorYAML is Operator i: every ConfigMap labelled op: "<i>", in
// any namespace, is copied by an Updater to "<name>-out" with a label.
func shardOperatorYAML(i int) string {
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %[1]s
spec:
  controllers:
    - name: copy
      sources:
        - apiGroup: ""
          kind: ConfigMap
          labelSelector:
            matchLabels: {op: "%[2]d"}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-out"]}
            namespace: "$.metadata.namespace"
            labels: {shard-out: "%[2]d"}
          data:
            v: "$.data.v"
            src: "$.metadata.name"
      target:
        apiGroup: ""
        kind: ConfigMap
`, shardOpName(i), i)
}

// shardPodOp is the namespace-sharded Operator over the Pods of every
// namespace: each Pod gets a ConfigMap "<pod>-pod" with its tier label and
// rev annotation.
const (
	shardPodOp     = "shard-pods"
	shardPodOwner  = shardPodOp + "/pod-info"
	shardPodOpYAML = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: shard-pods
spec:
  sharding: Namespace
  controllers:
    - name: pod-info
      sources:
        - apiGroup: ""
          kind: Pod
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-pod"]}
            namespace: "$.metadata.namespace"
            labels: {shard-pod: "out"}
          data:
            pod: "$.metadata.name"
            tier: "$.metadata.labels.tier"
            rev: "$.metadata.annotations.rev"
      target:
        apiGroup: ""
        kind: ConfigMap
`
)

// shardPods is the Pod workload: shardPodsPerNS Pods in each of the
// namespaces (shardPodNamespaces), each labelled with a tier and annotated
// with a revision that every update sets to a new value, so that each
// update is one watch event.
type shardPods struct {
	namespaces []string
	rev        atomic.Int64
}

func newShardPods(t testing.TB) *shardPods {
	return &shardPods{namespaces: shardPodNamespaces(t, shardPodNSPerBucket)}
}

func shardPodName(k int) string { return fmt.Sprintf("pod-%d", k) }

// objects returns the Pods (a container image name only: no scheduler
// runs, they stay Pending).
func (p *shardPods) objects() []client.Object {
	var out []client.Object
	for i, ns := range p.namespaces {
		for k := range shardPodsPerNS {
			out = append(out, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: shardPodName(k), Namespace: ns,
					Labels:      map[string]string{"tier": fmt.Sprintf("t%d", (i+k)%4)},
					Annotations: map[string]string{"rev": fmt.Sprint(p.rev.Add(1))}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "e2e.dcontroller.io/shard"}}},
			})
		}
	}
	return out
}

// update sets a random Pod's tier to a random value and its rev to a new
// one.
func (p *shardPods) update(ctx context.Context, c client.Client, rng *rand.Rand) error {
	return p.patch(ctx, c, p.namespaces[rng.IntN(len(p.namespaces))], rng.IntN(shardPodsPerNS), rng.IntN(4))
}

// patch sets Pod k of namespace ns to tier and a new rev (a JSON merge
// patch: no conflicts).
func (p *shardPods) patch(ctx context.Context, c client.Client, ns string, k, tier int) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shardPodName(k)}}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"tier":"t%d"},"annotations":{"rev":"%d"}}}`, tier, p.rev.Add(1))
	return c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// shardWorkloadNamespaces returns every namespace the workload uses: the
// ring's, the sources', the parents' and the Pods'.
func shardWorkloadNamespaces(pods *shardPods) []string {
	return append([]string{shardNamespace, "shard-src-0", "shard-src-1", "shard-src-2", "shard-par-0", "shard-par-1", "shard-par-2"}, pods.namespaces...)
}

const shardCompositeYAML = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: shard-parents
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: shardparents}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync: {webhook: {url: %s}}
    finalize: {webhook: {url: %s}}
`

// shardChildData is the data of a parent's child: derived from its spec.
func shardChildData(parent, value string) map[string]string {
	return map[string]string{"parent": parent, "value": value, "upper": strings.ToUpper(value)}
}

// shardSync is the sync hook of the parents: status.value and one child
// ConfigMap "<parent>-child" with shardChildData.
func shardSync(req map[string]any) any {
	name, value := str(path(req, "parent.metadata.name")), str(path(req, "parent.spec.value"))
	return map[string]any{
		"status": map[string]any{"value": value},
		"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name + "-child"},
			"data":     shardChildData(name, value),
		}},
	}
}

// shardFinalize is the finalize hook of the parents: no children; done
// when none is observed.
func shardFinalize(req map[string]any) any {
	children, _ := req["children"].(map[string]any)
	observed, _ := children["ConfigMap.v1"].(map[string]any)
	return map[string]any{"children": []any{}, "finalized": len(observed) == 0}
}

// TestShardingChurnFailover runs three `dctl start --sharding` replicas on
// a control plane of its own (with a write audit log) over 30 Operators and
// a CompositeController with 600 parents, churns sources and parents, kills
// one replica with SIGKILL mid-churn and starts a fourth later. It measures
// how long the killed member's buckets stay without a holder (at most the
// Lease duration and 5s), then checks that the cluster converges to what
// `dctl eval` computes from the final sources and to the hook's children
// of the live parents (children of deleted parents deleted through the
// finalize hook), that no object was written by two members less than a
// second apart (audit log), and that the last members split the buckets
// evenly. A namespace-sharded Operator maps 256 Pods in 128 namespaces
// to ConfigMaps; before the churn the Pods alone are churned with three
// live members, and each member's Pod watch events are counted
// (dcontroller_watch_events_total): with the kube-apiserver's
// ShardedListAndWatch feature gate (KEP-5866) on, the members watch with
// shard selectors and each receives at most shardPodShareMax of them; with
// the kube-apiserver's defaults, each receives all of them.
func TestShardingChurnFailover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gates string
	}{
		{name: "default-gates"},
		{name: "ShardedListAndWatch", gates: "ShardedListAndWatch=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runShardingChurnFailover(t, tc.gates)
		})
	}
}

func runShardingChurnFailover(t *testing.T, gates string) {
	ctx := context.Background()
	sc := startShardCluster(t, gates)
	if gates != "" {
		gate := strings.SplitN(gates, "=", 2)[0]
		if !sc.featureEnabled(t, gate) {
			t.Fatalf("the kube-apiserver runs without %s", gates)
		}
	}
	dir := t.TempDir()
	pods := newShardPods(t)
	for _, ns := range shardWorkloadNamespaces(pods) {
		if err := sc.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	sc.kubectl(t, crdYAML(shardParentKind, "shardparents", "Namespaced"), "apply", "-f", "-")
	sc.kubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+shardParentResource)

	syncHook := newHookServer(t, shardSync)
	finalizeHook := newHookServer(t, shardFinalize)

	history := sc.watchBuckets(t)
	var replicas []*shardReplica
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range replicas {
				t.Logf("replica %s (log %s), last lines:\n%s", r.id, r.logPath, r.tail(60))
			}
		}
	})
	start := func(id string) *shardReplica {
		r := startReplica(t, sc, dir, id, shardLease, shardRenew, shardRetry)
		replicas = append(replicas, r)
		return r
	}
	aliveAll := func() string {
		for _, r := range replicas {
			if msg := r.alive(); msg != "" && !r.killed {
				return msg
			}
		}
		return ""
	}
	// waitFor polls cond (and that no replica but the killed one exited)
	// until it returns "" or timeout passes.
	waitFor := func(what string, timeout time.Duration, cond func() string) time.Duration {
		t.Helper()
		begin := time.Now()
		var msg string
		for {
			if msg = aliveAll(); msg != "" {
				t.Fatalf("%s: %s", what, msg)
			}
			if msg = cond(); msg == "" {
				return time.Since(begin)
			}
			if time.Since(begin) > timeout {
				t.Fatalf("%s: not within %s: %s", what, timeout, msg)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	holdersBalanced := func(live ...string) func() string {
		return func() string {
			h, err := sc.bucketHolders(ctx)
			if err != nil {
				return err.Error()
			}
			return ringBalanced(h, live)
		}
	}

	m1 := start("m1")
	m2 := start("m2")
	m3 := start("m3")
	took := waitFor("three members split the buckets", 60*time.Second, holdersBalanced("m1", "m2", "m3"))
	t.Logf("ring of 3 balanced %s after the start", took.Round(time.Millisecond))

	// The workload.
	opFiles := make([]string, shardOperators)
	for i := range shardOperators {
		opFiles[i] = filepath.Join(dir, shardOpName(i)+".yaml")
		if err := os.WriteFile(opFiles[i], []byte(shardOperatorYAML(i)), 0o600); err != nil {
			t.Fatal(err)
		}
		sc.kubectl(t, "", "apply", "-f", opFiles[i])
	}
	podOpFile := filepath.Join(dir, shardPodOp+".yaml")
	if err := os.WriteFile(podOpFile, []byte(shardPodOpYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	sc.kubectl(t, "", "apply", "-f", podOpFile)
	sc.kubectl(t, fmt.Sprintf(shardCompositeYAML, syncHook.URL, finalizeHook.URL), "apply", "-f", "-")
	rng := rand.New(rand.NewPCG(5866, 1))
	var sources []client.Object
	for i := range shardOperators {
		for k := range shardSrcInitial {
			sources = append(sources, shardSourceObject(i, k, rng.IntN(1000)))
		}
	}
	var parents []client.Object
	for n := range shardParents {
		parents = append(parents, shardParentObject(n, rng.IntN(1000)))
	}
	podObjs := pods.objects()
	createAll(t, sc.c, append(append(sources, parents...), podObjs...))
	took = waitFor("the first sync", 180*time.Second, func() string {
		return shardConverged(t, sc, dir, opFiles, podOpFile)
	})
	t.Logf("%d Operators over %d sources, %s over %d Pods in %d namespaces and %d parents in sync %s after their creation",
		shardOperators, len(sources), shardPodOp, len(podObjs), len(pods.namespaces), len(parents), took.Round(time.Millisecond))

	// The Pod watch events of each member while the Pods alone change.
	if gates != "" {
		for _, r := range []*shardReplica{m1, m2, m3} {
			if lines := r.grep("sharded list and watch"); !containsAll(lines, "Resource=pods", `"serverSide": true`) {
				t.Errorf("member %s does not watch Pods with a shard selector; its log says:\n%s", r.id, strings.Join(lines, "\n"))
			}
		}
	}
	measurePodShares(t, sc, []*shardReplica{m1, m2, m3}, pods, gates != "")

	// Churn; m2 killed, m4 joining.
	var ops, failures atomic.Int64
	// Parents created by the churn get new names: the audit log names
	// objects by namespace and name, and a parent of the same name but
	// another UID may be another member's.
	var nextParent atomic.Int64
	nextParent.Store(shardParents)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(5866, uint64(100+w)))
			for {
				select {
				case <-stop:
					return
				case <-time.After(40 * time.Millisecond):
				}
				if err := shardChurnOnce(ctx, sc.c, rng, &nextParent, pods); err != nil {
					if failures.Add(1) == 1 {
						errs <- err
					}
					return
				}
				ops.Add(1)
			}
		}()
	}
	churnStart := time.Now()
	stopChurn := func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopChurn)
	sleepUntil := func(at time.Time) {
		for time.Now().Before(at) {
			if msg := aliveAll(); msg != "" {
				t.Fatal(msg)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	sleepUntil(churnStart.Add(shardKillAt))
	before, err := sc.bucketHolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var orphaned []int
	for b, h := range before {
		if h == m2.id {
			orphaned = append(orphaned, b)
		}
	}
	sort.Ints(orphaned)
	if len(orphaned) == 0 {
		t.Fatalf("m2 holds no bucket before it is killed: %v", before)
	}
	killed := time.Now()
	m2.kill(t)
	var takeover time.Duration
	for {
		h, err := sc.bucketHolders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, b := range orphaned {
			if h[b] == "" || h[b] == m2.id {
				left++
			}
		}
		if left == 0 {
			takeover = time.Since(killed)
			break
		}
		if time.Since(killed) > shardLease+30*time.Second {
			t.Fatalf("%d of m2's %d buckets still without another holder %s after the kill: %v", left, len(orphaned), time.Since(killed).Round(time.Millisecond), h)
		}
		if msg := aliveAll(); msg != "" {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("takeover: the %d buckets of the killed member m2 had other holders %s after the kill (lease duration %s)", len(orphaned), takeover.Round(time.Millisecond), shardLease)
	if takeover > shardLease+5*time.Second {
		t.Errorf("takeover took %s, more than the lease duration %s + 5s", takeover.Round(time.Millisecond), shardLease)
	}

	sleepUntil(churnStart.Add(shardJoinAt))
	joined := time.Now()
	start("m4")
	// How long until m4 has its share, measured while the churn goes on.
	rebalanced := make(chan time.Duration, 1)
	go func() {
		for time.Since(joined) < 60*time.Second {
			if h, err := sc.bucketHolders(ctx); err == nil && ringBalanced(h, []string{"m1", "m3", "m4"}) == "" {
				rebalanced <- time.Since(joined)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		close(rebalanced)
	}()
	sleepUntil(churnStart.Add(shardChurnFor))
	stopChurn()
	close(errs)
	for err := range errs {
		t.Fatalf("churn: %v", err)
	}
	t.Logf("churn: %d changes in %s", ops.Load(), time.Since(churnStart).Round(time.Millisecond))

	took = waitFor("convergence after the churn", 120*time.Second, func() string {
		return shardConverged(t, sc, dir, opFiles, podOpFile)
	})
	t.Logf("converged %s after the churn stopped", took.Round(time.Millisecond))
	if d, ok := <-rebalanced; ok {
		t.Logf("join: m1, m3 and m4 held an even share of the buckets %s after m4 started", d.Round(time.Millisecond))
	}
	waitFor("m1, m3 and m4 split the buckets", 10*time.Second, holdersBalanced("m1", "m3", "m4"))
	if msg := sc.memberLeaseExpired(ctx, m2.id); msg != "" {
		t.Errorf("the killed member's Lease: %s", msg)
	}

	sum := readAudit(t, sc.auditLog, []string{"configmaps", shardParentResource})
	for _, r := range replicas {
		t.Logf("member %s: %d writes of ConfigMaps and %s, %d answered 409 Conflict", r.id, sum.writes[r.id], shardParentKind, sum.conflicts[r.id])
	}
	t.Logf("hook calls: %d sync, %d finalize", syncHook.calls.Load(), finalizeHook.calls.Load())
	// No member but the killed one lost its Lease: no bucket went from a
	// live holder to another without a release, and no member says so.
	history.stop()
	direct, err := history.takeovers(m2.id, killed)
	if err != nil {
		t.Error(err)
	}
	if len(direct) > 0 {
		t.Errorf("%d bucket Leases went from a live holder to another without a release:\n%s", len(direct), strings.Join(direct, "\n"))
	}
	for _, r := range replicas {
		if lines := r.grep("buckets were taken over while this member held them"); len(lines) > 0 {
			t.Errorf("member %s says that its buckets were taken over (%d times) though it never lost its Lease and the bucket Leases' history shows %d takeovers from live members:\n%s",
				r.id, len(lines), len(direct), strings.Join(lines, "\n"))
		}
	}
	t.Logf("%d objects written by two members less than a second apart across a handover of their bucket (release, then acquisition, between the writes)", sum.handovers)
	if len(sum.doubles) > 0 {
		t.Errorf("%d objects written by two members less than a second apart:\n%s", len(sum.doubles), strings.Join(sum.doubles, "\n"))
	}
}

func shardSourceObject(i, k, v int) *corev1.ConfigMap {
	ns, name := shardSource(i, k)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"op": fmt.Sprint(i)}},
		Data:       map[string]string{"v": fmt.Sprint(v)},
	}
}

func shardParentObject(n, v int) *unstructured.Unstructured {
	ns, name := shardParent(n)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": shardParentAPIVersion, "kind": shardParentKind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"value": fmt.Sprintf("v%d", v)},
	}}
	return u
}

// createAll creates objs with 8 concurrent clients.
func createAll(t testing.TB, c client.Client, objs []client.Object) {
	t.Helper()
	work := make(chan client.Object)
	errs := make(chan error, len(objs))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := c.Create(context.Background(), o); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// shardChurnOnce makes one random change: a source's data updated,
// deleted or created, a parent's spec updated, a parent deleted or
// created (parents with names from next, never used before), a Pod's
// label and annotation updated. Conflicts and objects that are (not) there
// already are part of the churn; other errors are returned.
func shardChurnOnce(ctx context.Context, c client.Client, rng *rand.Rand, next *atomic.Int64, pods *shardPods) error {
	var err error
	switch r := rng.IntN(125); {
	case r >= 100:
		err = pods.update(ctx, c, rng)
	case r < 35:
		ns, name := shardSource(rng.IntN(shardOperators), rng.IntN(shardSrcSlots))
		cm := &corev1.ConfigMap{}
		if err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err == nil {
			cm.Data = map[string]string{"v": fmt.Sprint(rng.IntN(1000))}
			err = c.Update(ctx, cm)
		}
	case r < 43:
		err = c.Delete(ctx, shardSourceObject(rng.IntN(shardOperators), rng.IntN(shardSrcSlots), 0))
	case r < 50:
		err = c.Create(ctx, shardSourceObject(rng.IntN(shardOperators), rng.IntN(shardSrcSlots), rng.IntN(1000)))
	case r < 80:
		ns, name := shardParent(rng.IntN(int(next.Load())))
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(shardParentAPIVersion)
		u.SetKind(shardParentKind)
		if err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err == nil {
			_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("v%d", rng.IntN(1000)), "spec", "value")
			err = c.Update(ctx, u)
		}
	case r < 90:
		err = c.Delete(ctx, shardParentObject(rng.IntN(int(next.Load())), 0))
	default:
		err = c.Create(ctx, shardParentObject(int(next.Add(1)-1), rng.IntN(1000)))
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// shardConverged returns "" when the cluster holds what it should:
// for each Operator (opFiles, shardOperatorYAML; podOpFile,
// shardPodOpYAML), exactly the targets `dctl eval` computes from the
// current sources (labels, the annotations eval sets, data); for each live
// parent, its child with the data derived from its spec and its status;
// no parent being deleted and no child of a parent that is gone.
func shardConverged(t testing.TB, sc *shardCluster, dir string, opFiles []string, podOpFile string) string {
	t.Helper()
	ctx := context.Background()
	cms := &corev1.ConfigMapList{}
	if err := sc.c.List(ctx, cms); err != nil {
		return err.Error()
	}
	bySelector := map[string][][]byte{}
	actual := map[string]map[string]string{} // owner -> namespace/name -> canonical form
	children := map[string]corev1.ConfigMap{}
	for _, cm := range cms.Items {
		if op, ok := cm.Labels["op"]; ok {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cm)
			if err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: u}
			obj.SetAPIVersion("v1")
			obj.SetKind("ConfigMap")
			obj.SetManagedFields(nil)
			b, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			bySelector[op] = append(bySelector[op], b)
		}
		if owner := cm.Annotations[opv1a1.OwnerAnnotation]; owner != "" {
			if actual[owner] == nil {
				actual[owner] = map[string]string{}
			}
			actual[owner][cm.Namespace+"/"+cm.Name] = ""
		}
		if strings.HasPrefix(cm.Namespace, "shard-par-") && strings.HasSuffix(cm.Name, "-child") {
			children[cm.Namespace+"/"+strings.TrimSuffix(cm.Name, "-child")] = cm
		}
	}
	cmByKey := map[string]corev1.ConfigMap{}
	for _, cm := range cms.Items {
		cmByKey[cm.Namespace+"/"+cm.Name] = cm
	}

	// Operators: the cluster's targets against dctl eval's.
	for i, f := range opFiles {
		owner := shardOpName(i) + "/copy"
		want := evalTargets(t, dir, f, bySelector[fmt.Sprint(i)], owner)
		if msg := matchTargets(shardOpName(i), want, actual[owner], cmByKey, owner); msg != "" {
			return msg
		}
	}
	pods := &corev1.PodList{}
	if err := sc.c.List(ctx, pods); err != nil {
		return err.Error()
	}
	var podInputs [][]byte
	for i := range pods.Items {
		pod := pods.Items[i].DeepCopy()
		pod.APIVersion, pod.Kind = "v1", "Pod"
		pod.ManagedFields = nil
		b, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		podInputs = append(podInputs, b)
	}
	want := evalTargets(t, dir, podOpFile, podInputs, shardPodOwner)
	if msg := matchTargets(shardPodOp, want, actual[shardPodOwner], cmByKey, shardPodOwner); msg != "" {
		return msg
	}

	// Hook parents.
	pl := &unstructured.UnstructuredList{}
	pl.SetAPIVersion(shardParentAPIVersion)
	pl.SetKind(shardParentKind + "List")
	if err := sc.c.List(ctx, pl); err != nil {
		return err.Error()
	}
	live := map[string]bool{}
	for _, p := range pl.Items {
		key := p.GetNamespace() + "/" + p.GetName()
		if p.GetDeletionTimestamp() != nil {
			return fmt.Sprintf("parent %s is still being deleted (finalizers %v)", key, p.GetFinalizers())
		}
		live[key] = true
		value, _, _ := unstructured.NestedString(p.Object, "spec", "value")
		child, ok := children[key]
		if !ok {
			return fmt.Sprintf("parent %s has no child", key)
		}
		if want := shardChildData(p.GetName(), value); fmt.Sprint(child.Data) != fmt.Sprint(want) {
			return fmt.Sprintf("parent %s: child data %v, want %v", key, child.Data, want)
		}
		if st, _, _ := unstructured.NestedString(p.Object, "status", "value"); st != value {
			return fmt.Sprintf("parent %s: status.value %q, spec.value %q", key, st, value)
		}
	}
	for key := range children {
		if !live[key] {
			return fmt.Sprintf("child %s-child of a deleted parent remains", key)
		}
	}
	return ""
}

// matchTargets returns "" when the ConfigMaps of owner in the cluster (got,
// by namespace/name; cmByKey, all of them) are exactly want, the targets
// `dctl eval` computes for Operator op: same names, labels, data and the
// annotations eval sets; else the first difference.
func matchTargets(op string, want []map[string]any, got map[string]string, cmByKey map[string]corev1.ConfigMap, owner string) string {
	if len(got) != len(want) {
		var names []string
		for k := range got {
			names = append(names, k)
		}
		sort.Strings(names)
		if len(names) > 10 {
			names = append(names[:10], "...")
		}
		return fmt.Sprintf("Operator %s: %d targets in the cluster %v, dctl eval computes %d", op, len(got), names, len(want))
	}
	for _, w := range want {
		md, _ := w["metadata"].(map[string]any)
		key := str(md["namespace"]) + "/" + str(md["name"])
		cm, ok := cmByKey[key]
		if !ok || cm.Annotations[opv1a1.OwnerAnnotation] != owner {
			return fmt.Sprintf("Operator %s: target %s missing", op, key)
		}
		ann, _ := md["annotations"].(map[string]any)
		wantForm := canonTarget(stringMap(md["labels"]), stringMap(ann), stringMap(w["data"]))
		gotAnn := map[string]string{}
		for k := range ann {
			if v, ok := cm.Annotations[k]; ok {
				gotAnn[k] = v
			}
		}
		if gotForm := canonTarget(cm.Labels, gotAnn, cm.Data); gotForm != wantForm {
			return fmt.Sprintf("Operator %s: target %s is %s, dctl eval computes %s", op, key, gotForm, wantForm)
		}
	}
	return ""
}

// measurePodShares churns the Pods alone (4 clients, as fast as they go)
// for shardPodWindow while the ring of members is stable, then waits until
// the members' dcontroller_watch_events_total{kind="Pod"} have grown by
// the number of updates (each update is one event: with serverSide, for
// the one member of its namespace; else for every member) and logs each
// member's events and share of their sum. With serverSide a member's share
// must be at most shardPodShareMax, else each member must have received
// every update.
func measurePodShares(t *testing.T, sc *shardCluster, members []*shardReplica, pods *shardPods, serverSide bool) {
	t.Helper()
	ctx := context.Background()
	read := func() []float64 {
		out := make([]float64, len(members))
		for i, r := range members {
			m, err := r.watchEvents()
			if err != nil {
				t.Fatal(err)
			}
			out[i] = m["Pod"]
		}
		return out
	}
	holders, err := sc.bucketHolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg := ringBalanced(holders, []string{members[0].id, members[1].id, members[2].id}); msg != "" {
		t.Fatalf("the Pod watch window: the ring is not balanced over its three members: %s", msg)
	}
	begin := read()
	var updates atomic.Int64
	end := time.Now().Add(shardPodWindow)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(5866, uint64(200+w)))
			for time.Now().Before(end) {
				if err := pods.update(ctx, sc.c, rng); err != nil {
					errs <- err
					return
				}
				updates.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("updating Pods: %v", err)
	}
	n := float64(updates.Load())
	var got []float64
	var sum float64
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := read()
		got, sum = make([]float64, len(members)), 0
		delivered := true
		for i := range members {
			got[i] = now[i] - begin[i]
			sum += got[i]
			if !serverSide && got[i] < n {
				delivered = false
			}
		}
		if serverSide && sum < n {
			delivered = false
		}
		if delivered || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	after, err := sc.bucketHolders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(holders) {
		t.Fatalf("the Pod watch window: bucket holders changed from %v to %v", holders, after)
	}
	var parts []string
	for i, r := range members {
		parts = append(parts, fmt.Sprintf("%s %.0f (share %.3f)", r.id, got[i], got[i]/sum))
	}
	t.Logf("Pod watch events of the members for %.0f Pod updates in %s (server-side sharding %v): %s; sum %.0f",
		n, shardPodWindow, serverSide, strings.Join(parts, ", "), sum)
	for i, r := range members {
		switch {
		case serverSide && got[i]/sum > shardPodShareMax:
			t.Errorf("member %s received %.3f of the Pod watch events, more than %.3f", r.id, got[i]/sum, shardPodShareMax)
		case !serverSide && got[i] < n:
			t.Errorf("member %s received %.0f Pod watch events for %.0f Pod updates: without server-side sharding every member receives every event", r.id, got[i], n)
		}
	}
	if serverSide && sum < n {
		t.Errorf("the members received %.0f Pod watch events for %.0f Pod updates", sum, n)
	}
}

// containsAll reports whether one of lines contains every one of subs.
func containsAll(lines []string, subs ...string) bool {
	for _, l := range lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			return true
		}
	}
	return false
}

func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	out := map[string]string{}
	for k, x := range m {
		out[k] = str(x)
	}
	return out
}

// canonTarget is a comparable form of a target's labels, annotations and
// data (encoding/json sorts map keys).
func canonTarget(labels, annotations, data map[string]string) string {
	b, _ := json.Marshal(map[string]any{"labels": nonNil(labels), "annotations": nonNil(annotations), "data": nonNil(data)})
	return string(b)
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
