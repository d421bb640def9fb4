package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// shardAuditPolicy logs every write (create, update, patch, delete) at
// level Metadata, once per request (at ResponseComplete), and nothing else.
const shardAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
  - level: None
`

// shardCluster is a control plane of a test's own (kube-apiserver with
// the write audit log above, etcd, the CRDs of config/crd) and clients for
// it. It runs no kube-controller-manager: the sharding tests delete
// children through finalize hooks, not the garbage collector, and count
// the members' requests only.
type shardCluster struct {
	kubeconfig string
	auditLog   string
	cfg        *rest.Config
	c          client.Client
	cs         kubernetes.Interface
}

// startShardCluster starts the control plane, with featureGates (e.g.
// "ShardedListAndWatch=true"; empty: the defaults) on the kube-apiserver,
// and stops it when the test ends.
func startShardCluster(t testing.TB, featureGates string) *shardCluster {
	t.Helper()
	dir := t.TempDir()
	sc := &shardCluster{kubeconfig: filepath.Join(dir, "kubeconfig"), auditLog: filepath.Join(dir, "audit.log")}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(shardAuditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: filepath.Join(repoRoot, "bin", "k8s"),
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy).Set("audit-log-path", sc.auditLog)
	if featureGates != "" {
		args.Set("feature-gates", featureGates)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting a control plane with audit logging: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if err := os.WriteFile(sc.kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	sc.cfg = cfg
	scheme, err := operator.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if sc.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if sc.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return sc
}

// kubectl runs kubectl against the cluster, failing the test on an error.
func (sc *shardCluster) kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", sc.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := combinedOutputBounded(cmd)
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// featureEnabled reads the kube-apiserver's kubernetes_feature_enabled
// metric for gate: 1 when on.
func (sc *shardCluster) featureEnabled(t testing.TB, gate string) bool {
	t.Helper()
	body, err := sc.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the kube-apiserver's /metrics: %v", err)
	}
	want := fmt.Sprintf(`kubernetes_feature_enabled{name="%s",stage="`, gate)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, want) {
			return strings.HasSuffix(line, " 1")
		}
	}
	t.Fatalf("the kube-apiserver's /metrics has no kubernetes_feature_enabled series for %s", gate)
	return false
}

// shardReplica is one `dctl start --sharding` process.
type shardReplica struct {
	id      string
	logPath string
	// metricsAddr is the host:port of its Prometheus endpoint.
	metricsAddr string
	cmd         *exec.Cmd
	exited      chan struct{}
	err         error
	killed      bool
}

// startReplica runs `dctl start --sharding` as ring member id against the
// cluster, with the given Lease timings, its output in a file of dir and
// its metrics on a free loopback port. The process gets SIGTERM (SIGKILL
// after 20s) when the test ends.
func startReplica(t testing.TB, sc *shardCluster, dir, id string, lease, renew, retry time.Duration) *shardReplica {
	t.Helper()
	r := &shardReplica{id: id, logPath: filepath.Join(dir, id+".log"), exited: make(chan struct{}), metricsAddr: shardFreeAddr(t)}
	f, err := os.Create(r.logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(dctlBin, "start", "--kubeconfig", sc.kubeconfig,
		"--sharding", "--sharding-namespace", shardNamespace, "--sharding-identity", id,
		"--sharding-lease-duration", lease.String(), "--sharding-renew-deadline", renew.String(),
		"--sharding-retry-period", retry.String(),
		"--metrics-addr", r.metricsAddr, "--health-addr", "0", "--api-server-addr", "127.0.0.1:0")
	r.cmd.Stdout, r.cmd.Stderr = f, f
	if err := r.cmd.Start(); err != nil {
		f.Close()
		t.Fatal(err)
	}
	go func() {
		r.err = r.cmd.Wait()
		f.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(20 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// kill ends the process with SIGKILL (no release of its Leases) and waits
// for it.
func (r *shardReplica) kill(t testing.TB) {
	t.Helper()
	r.killed = true
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.exited
}

// shardFreeAddr returns a loopback host:port that was free a moment ago.
func shardFreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// watchEvents reads dcontroller_watch_events_total from the replica's
// metrics endpoint: objects its informers received, by kind.
func (r *shardReplica) watchEvents() (map[string]float64, error) {
	resp, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of %s: %s", r.id, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		m := watchEventsLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %q: %w", r.id, sc.Text(), err)
		}
		out[m[1]] = v
	}
	return out, sc.Err()
}

var watchEventsLine = regexp.MustCompile(`^dcontroller_watch_events_total\{kind="([^"]*)"\} (\S+)$`)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100
// on every Linux architecture Go supports (the kernel's ABI since 2.6).
const clockTicks = 100

// cpuTime returns the CPU time (user + system) the replica's process has
// used so far, from fields 14 and 15 of /proc/<pid>/stat (proc(5)), with a
// resolution of 1/clockTicks seconds.
func (r *shardReplica) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", r.cmd.Process.Pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", r.cmd.Process.Pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", r.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// alive returns "" while the process runs, else how it ended.
func (r *shardReplica) alive() string {
	select {
	case <-r.exited:
		return fmt.Sprintf("replica %s exited: %v", r.id, r.err)
	default:
		return ""
	}
}

// tail returns the last n lines of the replica's log.
func (r *shardReplica) tail(n int) string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// grep returns the lines of the replica's log that contain s.
func (r *shardReplica) grep(s string) []string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// bucketHolders reads the ring's bucket Leases: holder identity by bucket
// ("" when free; absent when the Lease does not exist yet).
func (sc *shardCluster) bucketHolders(ctx context.Context) (map[int]string, error) {
	l, err := sc.cs.CoordinationV1().Leases(shardNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: sharding.LabelRing + "=" + sharding.DefaultRing + "," + sharding.LabelRole + "=bucket"})
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	prefix := sharding.DefaultRing + "-bucket-"
	for _, le := range l.Items {
		var b int
		if _, err := fmt.Sscanf(strings.TrimPrefix(le.Name, prefix), "%d", &b); err != nil || !strings.HasPrefix(le.Name, prefix) {
			return nil, fmt.Errorf("bucket Lease %s: unexpected name", le.Name)
		}
		holder := ""
		if le.Spec.HolderIdentity != nil {
			holder = *le.Spec.HolderIdentity
		}
		out[b] = holder
	}
	return out, nil
}

// ringBalanced returns "" when every bucket Lease exists and is held by one
// of live, each member of live holding an even share (floor or ceil of
// Buckets/len(live)); else what is wrong.
func ringBalanced(holders map[int]string, live []string) string {
	per := map[string]int{}
	for b := 0; b < sharding.Buckets; b++ {
		h, ok := holders[b]
		switch {
		case !ok:
			return fmt.Sprintf("bucket %d has no Lease", b)
		case h == "":
			return fmt.Sprintf("bucket %d is free", b)
		}
		per[h]++
	}
	lo, hi := sharding.Buckets/len(live), (sharding.Buckets+len(live)-1)/len(live)
	for h, n := range per {
		if !contains(live, h) {
			return fmt.Sprintf("%d buckets held by %s, not a live member (live: %v)", n, h, live)
		}
	}
	for _, m := range live {
		if per[m] < lo || per[m] > hi {
			return fmt.Sprintf("member %s holds %d buckets, not %d..%d (%v)", m, per[m], lo, hi, per)
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// memberLeaseExpired returns "" when member id's Lease is gone or was last
// renewed more than its duration ago.
func (sc *shardCluster) memberLeaseExpired(ctx context.Context, id string) string {
	le, err := sc.cs.CoordinationV1().Leases(shardNamespace).Get(ctx, sharding.DefaultRing+"-member-"+id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		return err.Error()
	}
	return leaseExpired(le, time.Now())
}

func leaseExpired(le *coordinationv1.Lease, now time.Time) string {
	if le.Spec.RenewTime == nil || le.Spec.LeaseDurationSeconds == nil {
		return fmt.Sprintf("Lease %s has no renewTime or leaseDurationSeconds", le.Name)
	}
	until := le.Spec.RenewTime.Add(time.Duration(*le.Spec.LeaseDurationSeconds) * time.Second)
	if now.Before(until) {
		return fmt.Sprintf("Lease %s is valid until %s", le.Name, until.Format(time.RFC3339Nano))
	}
	return ""
}

// memberAgent extracts the member identity from a sharding member's
// User-Agent, "dctl/<version> (sharding member <identity>)".
var memberAgent = regexp.MustCompile(`\(sharding member ([a-z0-9-]+)\)`)

// auditWrite is one write of a ring member from the audit log.
type auditWrite struct {
	member string
	object string // <resource>.<group> <namespace>/<name>
	verb   string
	code   int32
	at     time.Time
}

// auditSummary is what the audit log says about the members' writes of
// the resources counted.
type auditSummary struct {
	// writes is the number of successful writes per member.
	writes map[string]int
	// conflicts is the number of 409 responses per member.
	conflicts map[string]int
	// doubles lists objects written successfully by two members less than
	// a second apart without a handover of the object's bucket (a release
	// by the first and an acquisition by the second) between the writes.
	doubles []string
	// handovers counts pairs of writes of one object by two members less
	// than a second apart with a handover of its bucket between them.
	handovers int
}

// readAudit parses the audit log (JSON lines of audit.k8s.io/v1 Events)
// and summarizes the writes of the ring members to the resources in
// counted (e.g. "configmaps", "shardparents.e2e.dcontroller.io"); Leases,
// Events and other resources are left out.
func readAudit(t testing.TB, file string, counted []string) auditSummary {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum := auditSummary{writes: map[string]int{}, conflicts: map[string]int{}}
	byObject := map[string][]auditWrite{}
	leases := map[int][]auditWrite{} // bucket → writes of its Lease
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var partial error
	for sc.Scan() {
		if partial != nil {
			t.Fatalf("audit log %s: %v", file, partial)
		}
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// Only the last line may be cut short (the API server still
			// runs).
			partial = err
			continue
		}
		m := memberAgent.FindStringSubmatch(ev.UserAgent)
		if m == nil || ev.ObjectRef == nil || ev.ResponseStatus == nil {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.APIGroup != "" {
			res += "." + ev.ObjectRef.APIGroup
		}
		if res == "leases.coordination.k8s.io" {
			if b := bucketLease.FindStringSubmatch(ev.ObjectRef.Name); b != nil && ev.ResponseStatus.Code < 300 {
				n, _ := strconv.Atoi(b[1])
				leases[n] = append(leases[n], auditWrite{member: m[1], verb: ev.Verb, at: ev.RequestReceivedTimestamp.Time})
			}
			continue
		}
		if !contains(counted, res) {
			continue
		}
		w := auditWrite{member: m[1], verb: ev.Verb, code: ev.ResponseStatus.Code, at: ev.RequestReceivedTimestamp.Time,
			object: fmt.Sprintf("%s %s/%s", res, ev.ObjectRef.Namespace, ev.ObjectRef.Name)}
		switch {
		case w.code == 409:
			sum.conflicts[w.member]++
		case w.code >= 200 && w.code < 300:
			sum.writes[w.member]++
			byObject[w.object] = append(byObject[w.object], w)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ws := range leases {
		sort.Slice(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
	}
	for obj, ws := range byObject {
		sort.Slice(ws, func(i, j int) bool { return ws[i].at.Before(ws[j].at) })
		// Two writes of different members less than a second apart are
		// then also next to each other with different members somewhere
		// in between.
		for i := 1; i < len(ws); i++ {
			if ws[i].member == ws[i-1].member || ws[i].at.Sub(ws[i-1].at) >= time.Second {
				continue
			}
			if handedOver(leases, shardBucketOf(obj), ws[i-1], ws[i]) {
				sum.handovers++
				continue
			}
			sum.doubles = append(sum.doubles, fmt.Sprintf("%s: %s %s at %s, %s %s at %s", obj,
				ws[i-1].member, ws[i-1].verb, ws[i-1].at.Format("15:04:05.000000"),
				ws[i].member, ws[i].verb, ws[i].at.Format("15:04:05.000000")))
			break
		}
	}
	sort.Strings(sum.doubles)
	return sum
}

// bucketLease matches a bucket Lease's name, "<ring>-bucket-NN".
var bucketLease = regexp.MustCompile(`-bucket-([0-9]+)$`)

// shardOutput matches an output of shard-op-II: "configmaps
// shard-src-K/sII-K-out".
var shardOutput = regexp.MustCompile(`^configmaps shard-src-[0-9]+/s([0-9]+)-[0-9]+-out$`)

// shardBucketOf is the bucket that decides which member writes object
// ("<resource> <namespace>/<name>" of readAudit): the Operator's for the
// outputs of shard-op-II, the namespace's for those of the
// namespace-sharded shard-pods, -1 (unknown) for the children and status of
// CompositeController parents, whose bucket is their parent's UID.
func shardBucketOf(object string) int {
	if m := shardOutput.FindStringSubmatch(object); m != nil {
		i, _ := strconv.Atoi(m[1])
		return sharding.NameBucket(shardOpName(i))
	}
	if ns, name, ok := strings.Cut(strings.TrimPrefix(object, "configmaps "), "/"); ok &&
		strings.HasPrefix(object, "configmaps ") && strings.HasSuffix(name, "-pod") {
		return sharding.Bucket(ns)
	}
	return -1
}

// handedOver tells whether a bucket went from first's member to second's
// between their writes: first's member wrote the bucket's Lease (its
// release) at or after first, and second's member wrote it (its
// acquisition) after that and before second. A bucket of -1 (unknown)
// accepts a handover of any bucket. Audit times are when the API server
// received each request, and a member writes an object only after its
// acquisition of the bucket came back and releases it only after its
// writes came back, so a handover in between orders the two writes.
func handedOver(leases map[int][]auditWrite, bucket int, first, second auditWrite) bool {
	for b, ws := range leases {
		if bucket >= 0 && b != bucket {
			continue
		}
		var released time.Time
		for _, w := range ws {
			switch {
			case w.at.Before(first.at) || w.at.After(second.at):
			case w.member == first.member:
				released = w.at
			case w.member == second.member && !released.IsZero() && w.at.After(released):
				return true
			}
		}
	}
	return false
}

// evalTargets runs `dctl eval -f opFile -i <inputs>` on the given input
// objects (JSON, one per element) and returns the objects of the output
// whose dcontroller.io/owner annotation is owner.
func evalTargets(t testing.TB, dir, opFile string, inputs [][]byte, owner string) []map[string]any {
	t.Helper()
	in := filepath.Join(dir, filepath.Base(opFile)+".inputs.yaml")
	if err := os.WriteFile(in, bytes.Join(inputs, []byte("\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dctlBin, "eval", "-f", opFile, "-i", in, "-o", "json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runBounded(cmd); err != nil {
		t.Fatalf("dctl eval -f %s -i %s: %v\n%s", opFile, in, err, errb.String())
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("dctl eval output: %v", err)
	}
	var targets []map[string]any
	for _, o := range list.Items {
		md, _ := o["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann[opv1a1.OwnerAnnotation] == owner {
			targets = append(targets, o)
		}
	}
	return targets
}

// holderChange is a bucket Lease's holder as a watch delivered it.
type holderChange struct {
	at     time.Time
	bucket int
	holder string
}

// leaseHistory records every holder of every bucket Lease of the ring, in
// the order of the API server's watch, from its start until stop.
type leaseHistory struct {
	mu      sync.Mutex
	changes []holderChange
	err     error
	done    chan struct{}
	cancel  context.CancelFunc
}

// watchBuckets starts recording the bucket Leases' holders (the ring need
// not exist yet).
func (sc *shardCluster) watchBuckets(t testing.TB) *leaseHistory {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &leaseHistory{done: make(chan struct{}), cancel: cancel}
	leases := sc.cs.CoordinationV1().Leases(shardNamespace)
	sel := sharding.LabelRing + "=" + sharding.DefaultRing + "," + sharding.LabelRole + "=bucket"
	l, err := leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return leases.Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	prefix := sharding.DefaultRing + "-bucket-"
	go func() {
		defer close(h.done)
		defer rw.Stop()
		for ev := range rw.ResultChan() {
			le, ok := ev.Object.(*coordinationv1.Lease)
			if !ok || ev.Type == watch.Bookmark {
				if st, ok := ev.Object.(*metav1.Status); ok {
					h.mu.Lock()
					h.err = fmt.Errorf("watching bucket Leases: %s", st.Message)
					h.mu.Unlock()
				}
				continue
			}
			var b int
			if _, err := fmt.Sscanf(strings.TrimPrefix(le.Name, prefix), "%d", &b); err != nil {
				continue
			}
			holder := ""
			if le.Spec.HolderIdentity != nil && ev.Type != watch.Deleted {
				holder = *le.Spec.HolderIdentity
			}
			h.mu.Lock()
			h.changes = append(h.changes, holderChange{at: time.Now(), bucket: b, holder: holder})
			h.mu.Unlock()
		}
	}()
	t.Cleanup(h.stop)
	return h
}

func (h *leaseHistory) stop() {
	h.cancel()
	<-h.done
}

// takeovers returns each change of a bucket Lease from one holder straight
// to another (not through a release), except those from dead (a member
// killed at deadAt) at or after deadAt.
func (h *leaseHistory) takeovers(dead string, deadAt time.Time) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := map[int]string{}
	var out []string
	for _, c := range h.changes {
		prev := last[c.bucket]
		last[c.bucket] = c.holder
		if prev == "" || c.holder == "" || prev == c.holder {
			continue
		}
		if prev == dead && !c.at.Before(deadAt) {
			continue
		}
		out = append(out, fmt.Sprintf("bucket %d: %s -> %s at %s", c.bucket, prev, c.holder, c.at.Format("15:04:05.000")))
	}
	return out, h.err
}

// shardWords make the names of the Pod namespaces: "<word>-<word>".
var shardWords = []string{"amber", "birch", "cedar", "delta", "ember", "fjord", "glade", "heron",
	"iris", "juniper", "kelp", "lotus", "maple", "nectar", "onyx", "pine", "quartz", "raven", "sage",
	"tundra", "umber", "violet", "willow", "xenon", "yarrow", "zephyr", "aspen", "basalt", "coral",
	"dune", "fern", "granite"}

// shardPodNamespaces returns perBucket*sharding.Buckets namespace names,
// "<word>-<word>" from shardWords in a fixed order, with exactly perBucket
// names in each bucket (sharding.Bucket, the KEP-5866 hash of the
// namespace): a member's share of the namespaces is then its share of the
// buckets. The list is the same on every run; it fails the test when the
// words do not fill every bucket.
func shardPodNamespaces(t testing.TB, perBucket int) []string {
	t.Helper()
	per := make([]int, sharding.Buckets)
	var out []string
	for _, a := range shardWords {
		for _, b := range shardWords {
			if a == b {
				continue
			}
			name := a + "-" + b
			if bk := sharding.Bucket(name); per[bk] < perBucket {
				per[bk]++
				out = append(out, name)
			}
		}
	}
	if len(out) != perBucket*sharding.Buckets {
		t.Fatalf("the %d words give %d namespace names with at most %d per bucket, not %d", len(shardWords), len(out), perBucket, perBucket*sharding.Buckets)
	}
	return out
}
