package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/internal/cputime"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

const benchPods = 2000

// benchPprofDirEnv names a directory, made when missing: when set, the
// benchmarks that run `dctl start` serve its pprof endpoint and save a CPU
// profile (cpu-*.pprof) and a heap profile (heap-*.pprof) of the manager's
// busy phase there, and more (see profile, saveAllocs, profileAPIServer).
const benchPprofDirEnv = "DCTL_BENCH_PPROF_DIR"

func createPods(b *testing.B, ns string, n int) {
	b.Helper()
	ctx := context.Background()
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", i), Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			if err := k8sClient.Create(ctx, p); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

// unthrottled is the test cluster's client configuration without
// client-side rate limiting (QPS -1, as controller-runtime's GetConfig
// gives when QPS is unset).
func unthrottled() *rest.Config {
	cfg := rest.CopyConfig(restConfig)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// benchLoopFieldManager is the field manager of the timed plain loop's
// patches. The pods are created by the benchmark's own client, whose field
// manager (client-go's default, from its user agent) a loop over the same
// client would share: its patches would merge into the creator's
// managedFields entry, where the operator's, like any other writer's, add
// an entry of their own, and every later step of each write (etcd, the
// field manager's merge, the watch events' encoding) would handle a
// smaller object for the loop. Under a name of its own the loop leaves the
// pods as the operator does (podShape logs both).
const benchLoopFieldManager = "bench-loop"

// podShape describes one pod of ns as read back: its size re-encoded as
// JSON and its managedFields entries' managers.
func podShape(b *testing.B, ns string) string {
	b.Helper()
	p := &corev1.Pod{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "pod-0000"}, p); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	var managers []string
	for _, e := range p.ManagedFields {
		managers = append(managers, e.Manager)
	}
	return fmt.Sprintf("%d bytes of JSON, managedFields of %v", len(raw), managers)
}

// plainPatchLoop sends one merge patch setting the annotation key to value
// to each of the n pods of ns, from workers goroutines over one
// unthrottled client, and returns the wall time.
func plainPatchLoop(b *testing.B, c client.Client, ns string, n, workers int, key, value string, opts ...client.PatchOption) time.Duration {
	b.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1) - 1); j < n; j = int(next.Add(1) - 1) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", j), Namespace: ns}}
				if err := c.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch), opts...); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// annotationWatch counts the pods of a namespace that carry the
// container-num annotation "1", from a watch (polling lists of thousands of
// pods would load the API server the benchmark measures). One runs during
// the plain loop too, so that both phases have the same observer.
type annotationWatch struct {
	w     watch.Interface
	done  chan struct{}
	n     atomic.Int64
	first atomic.Int64 // UnixNano of the first annotated pod seen
}

func watchAnnotated(b *testing.B, ns string) *annotationWatch {
	b.Helper()
	cs, err := kubernetes.NewForConfig(unthrottled())
	if err != nil {
		b.Fatal(err)
	}
	// From the current state on: a list gives the pods already annotated and
	// the resourceVersion the watch starts from.
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	timeout := int64(900)
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{
		ResourceVersion: l.ResourceVersion, TimeoutSeconds: &timeout})
	if err != nil {
		b.Fatal(err)
	}
	a := &annotationWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		seen := map[string]bool{}
		for i := range l.Items {
			if l.Items[i].Annotations["dcontroller.io/container-num"] == "1" {
				seen[l.Items[i].Name] = true
				a.n.Add(1)
			}
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || seen[p.Name] || p.Annotations["dcontroller.io/container-num"] != "1" {
				continue
			}
			seen[p.Name] = true
			if a.n.Add(1) == 1 {
				a.first.Store(time.Now().UnixNano())
			}
		}
	}()
	return a
}

// wait polls the count until it reaches n or timeout passes; it returns
// the count.
func (a *annotationWatch) wait(n int, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for int(a.n.Load()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return int(a.n.Load())
}

func (a *annotationWatch) stop() { a.w.Stop(); <-a.done }

// BenchmarkAnnotatePods annotates 2,000 pods with the getting-started
// operator run by the real `dctl start` binary with its default settings,
// and compares the wall time with plain client-go loops sending the same
// 2,000 merge patches without client-side rate limiting: one with as many
// workers as the operator's controller has writes in flight
// (operator.WriteConcurrency; like with like, the gate; under a field
// manager of its own, benchLoopFieldManager) and one sequential.
// The operator is timed from its creation (with the manager already
// running) to the last annotation seen on a watch, so its time includes
// listing the pods into its cache (the Operator object is created with a
// client, not kubectl, so no process start is timed). Each phase has 2,000
// pods of its own, created before it and deleted after it; the loops run
// first in even rounds, the operator in odd ones. Each timed phase starts
// once the control plane is idle (waitControlPlaneQuiet). Reported:
// the loops' and the operator's pods/s, time-ratio (operator time / plain
// time at equal concurrency; target <= 1.15, checked), the ratio to the
// sequential loop, the dctl process's peak RSS and CPU per pod, and the
// control plane's CPU with the operator over that with the loop; logged:
// the CPU seconds of the API server and etcd, of kube-controller-manager
// and of the benchmark's own process in each phase, the machine's steal
// time in each phase and one pod after each (podShape). With
// DCTL_BENCH_PPROF_DIR set, the manager's CPU and allocation profiles, an
// execution trace of its first second and the API server's CPU profile of
// each phase are saved there. Run with
// -benchtime=1x; with DCTL_BENCH_ROUNDS=N it runs N rounds and judges
// their median ratio; DCTL_BENCH_DCTL_ARGS adds flags to `dctl start`.
func BenchmarkAnnotatePods(b *testing.B) {
	op, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	plainClient, err := client.New(unthrottled(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var ratios []float64
	for i := 0; i < b.N*benchRounds(b); i++ {
		suffix := fmt.Sprintf("%d-%d", time.Now().Unix()%100000, i)
		// The phases alternate their order from round to round: the second
		// one runs on the API server the first left (its heap grown by
		// 2,000 writes and deletes whose garbage is collected later, its
		// watch cache holding their events), and neither should always.
		var pl plainPhase
		var ap operatorPhase
		order := "loop first"
		if i%2 == 0 {
			pl = annotateWithLoops(b, plainClient, "bench-plain-"+suffix, i)
			ap = annotateWithOperator(b, op, "bench-op-"+suffix, i)
		} else {
			order = "operator first"
			ap = annotateWithOperator(b, op, "bench-op-"+suffix, i)
			pl = annotateWithLoops(b, plainClient, "bench-plain-"+suffix, i)
		}
		ratio := ap.elapsed.Seconds() / pl.elapsed.Seconds()
		b.Logf("round %d (%s): plain loop: %v sequential, %v with %d workers; operator %v (first annotation after %v, manager CPU %v); peak RSS %d MiB",
			i, order, pl.sequential.Round(time.Millisecond), pl.elapsed.Round(time.Millisecond), operator.WriteConcurrency,
			ap.elapsed.Round(time.Millisecond), ap.firstWrite.Round(time.Millisecond), ap.managerCPU, ap.rss>>20)
		b.Logf("API requests per pod (or in all, under 0.01 per pod), from every client: plain loop %s; operator %s", pl.reqs, ap.reqs)
		b.Logf("a pod after the plain loop: %s; after the operator: %s", pl.shape, ap.shape)
		b.Logf("manager page faults with the operator: %d major (pages read from the executable), %d minor", ap.major, ap.minor)
		b.Logf("CPU: API server and etcd %v (etcd %v) with the plain loop, %v (etcd %v) with the operator; benchmark process (the loop and the watch; the watch) %v, %v; kube-controller-manager %v, %v; the machine's steal time %v, %v",
			pl.cpu.controlPlane, pl.cpu.etcd, ap.cpu.controlPlane, ap.cpu.etcd, pl.cpu.self, ap.cpu.self, pl.cpu.kcm, ap.cpu.kcm, pl.cpu.steal, ap.cpu.steal)
		b.ReportMetric(float64(benchPods)/pl.sequential.Seconds(), "plain-seq-pods/s")
		b.ReportMetric(float64(benchPods)/pl.elapsed.Seconds(), "plain-pods/s")
		b.ReportMetric(float64(benchPods)/ap.elapsed.Seconds(), "operator-pods/s")
		b.ReportMetric(ap.firstWrite.Seconds(), "s-to-first-annotation")
		b.ReportMetric(ap.elapsed.Seconds()/pl.sequential.Seconds(), "time-ratio-seq")
		b.ReportMetric(float64(ap.rss)/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(ap.managerCPU.Microseconds())/benchPods, "manager-CPU-µs/pod")
		b.ReportMetric(float64(ap.cpu.controlPlane.Microseconds())/float64(pl.cpu.controlPlane.Microseconds()), "control-plane-CPU-ratio")
		ratios = append(ratios, ratio)
	}
	m := median(ratios)
	b.ReportMetric(m, "time-ratio")
	if m > 1.15 {
		b.Errorf("the operator took %.2fx the plain loop's time at %d writes in flight (median of %d rounds: %.2f), want <= 1.15x",
			m, operator.WriteConcurrency, len(ratios), ratios)
	}
}

// plainPhase is what BenchmarkAnnotatePods measures of the plain loops.
type plainPhase struct {
	sequential, elapsed time.Duration // the sequential loop's time; the timed loop's
	reqs                string        // every client's API requests per pod during the timed loop (requestsSince)
	cpu                 phaseCPU      // used during the timed loop
	shape               string        // a pod after the loop (podShape)
}

// annotateWithLoops creates benchPods pods in the new namespace ns,
// annotates them with a sequential loop and then, timed, with a loop of
// operator.WriteConcurrency workers, and deletes them. The sequential loop
// writes an annotation of its own, so that the timed one adds the
// container-num annotation to pods without it, as the operator does,
// instead of changing a value.
func annotateWithLoops(b *testing.B, c client.Client, ns string, round int) plainPhase {
	b.Helper()
	var r plainPhase
	createPods(b, ns, benchPods)
	r.sequential = plainPatchLoop(b, c, ns, benchPods, 1, "dcontroller.io/bench-sequential", "1")
	pw := watchAnnotated(b, ns)
	waitControlPlaneQuiet(b)
	reqs0 := serverRequests(b)
	phase0 := readPhaseCPU(b)
	profileAPIServer(b, fmt.Sprintf("plain-%d", round), 2*time.Second)
	r.elapsed = plainPatchLoop(b, c, ns, benchPods, operator.WriteConcurrency, "dcontroller.io/container-num", "1", client.FieldOwner(benchLoopFieldManager))
	r.reqs = requestsSince(reqs0, serverRequests(b), benchPods)
	if n := pw.wait(benchPods, time.Minute); n < benchPods {
		b.Fatalf("the plain loop's watch saw %d of %d pods annotated", n, benchPods)
	}
	r.cpu = readPhaseCPU(b).since(phase0)
	r.shape = podShape(b, ns)
	pw.stop()
	deleteBenchPods(b, ns)
	return r
}

// operatorPhase is what BenchmarkAnnotatePods measures of the operator.
type operatorPhase struct {
	elapsed, firstWrite time.Duration // from the Operator's creation to the last and first annotation seen
	managerCPU          time.Duration
	major, minor        int64    // the manager's page faults
	rss                 int64    // the manager's peak RSS, bytes
	reqs                string   // every client's API requests per pod during the phase (requestsSince)
	cpu                 phaseCPU // used during the phase
	shape               string   // a pod after the phase (podShape)
}

// annotateWithOperator creates benchPods pods in the new namespace ns,
// starts `dctl start` and times the annotator operator (op, restricted to
// ns) from its creation to the last annotation seen on a watch; then it
// deletes the operator, stops the manager and deletes the pods.
func annotateWithOperator(b *testing.B, op []byte, ns string, round int) operatorPhase {
	b.Helper()
	ctx := context.Background()
	var r operatorPhase
	createPods(b, ns, benchPods)
	p := startDctlB(b, strings.Fields(os.Getenv(benchDctlArgsEnv))...)
	spec := strings.Replace(string(op), "namespace: default", "namespace: "+ns, 1)
	spec = strings.Replace(spec, "name: pod-container-num-annotator\nspec", "name: bench-annotator\nspec", 1)
	opObj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(spec), &opObj.Object); err != nil {
		b.Fatal(err)
	}
	aw := watchAnnotated(b, ns)
	waitControlPlaneQuiet(b)
	stat0 := p.stat(b)
	reqs0 := serverRequests(b)
	phase0 := readPhaseCPU(b)
	start := time.Now()
	p.profile(b, fmt.Sprintf("annotate-%d", round), 10*time.Second)
	profileAPIServer(b, fmt.Sprintf("annotate-%d", round), 3*time.Second)
	if err := k8sClient.Create(ctx, opObj); err != nil {
		b.Fatal(err)
	}
	if n := aw.wait(benchPods, 5*time.Minute); n < benchPods {
		b.Fatalf("only %d of %d pods annotated after 5m", n, benchPods)
	}
	r.elapsed = time.Since(start)
	stat1 := p.stat(b)
	r.managerCPU, r.major, r.minor = stat1.cpu-stat0.cpu, stat1.major-stat0.major, stat1.minor-stat0.minor
	r.cpu = readPhaseCPU(b).since(phase0)
	r.reqs = requestsSince(reqs0, serverRequests(b), benchPods)
	r.firstWrite = time.Unix(0, aw.first.Load()).Sub(start)
	r.shape = podShape(b, ns)
	aw.stop()
	r.rss = p.peakRSS(b)
	p.saveAllocs(b, fmt.Sprintf("annotate-%d", round))
	if _, err := kubectlB("", "delete", "operators.dcontroller.io", "bench-annotator"); err != nil {
		b.Fatal(err)
	}
	p.stop(b)
	deleteBenchPods(b, ns)
	return r
}

// deleteBenchPods deletes the pods of ns and ns itself, so that the next
// phase's caches hold only what it serves, and waits until the namespace
// is gone: kube-controller-manager's namespace controller empties a
// deleted namespace with a list and a collection delete of every
// namespaced resource (about 70 requests), and when it did so inside the
// next timed phase, the phase paid for them.
func deleteBenchPods(b *testing.B, ns string) {
	b.Helper()
	ctx := context.Background()
	if err := k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8sClient.Delete(ctx, nsObj); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	start := time.Now()
	eventually(b, 3*time.Minute, func() string {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(nsObj), nsObj); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("namespace %s still there after its deletion (phase %s, %v)", ns, nsObj.Status.Phase, err)
		}
		return ""
	})
	b.Logf("namespace %s gone %s after its deletion", ns, time.Since(start).Round(time.Millisecond))
}

// benchDctlArgsEnv holds more `dctl start` flags, separated by spaces,
// for the manager BenchmarkAnnotatePods, BenchmarkScale and
// BenchmarkScaleComposite run (to compare settings, e.g.
// "--kube-api-content-type application/json").
const benchDctlArgsEnv = "DCTL_BENCH_DCTL_ARGS"

// benchRoundsEnv sets how many rounds the end-to-end benchmarks that
// compare with a plain loop or a peer's binary run per iteration (default
// 1); they judge the median of the rounds' ratios, so that one round
// slowed by another load on a shared machine does not decide.
const benchRoundsEnv = "DCTL_BENCH_ROUNDS"

// benchRounds returns the round count of benchRoundsEnv (checked before
// the control plane starts: checkBenchCounts).
func benchRounds(b *testing.B) int {
	n, err := roundCount()
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// dctlProcess is a running `dctl start` against the test cluster.
type dctlProcess struct {
	cmd    *exec.Cmd
	logs   *bytes.Buffer
	pprof  string // pprof address, "" when off
	exited chan error
	// profiling counts the profile downloads under way (see profile);
	// stop waits for them, so that the process serves them to the end.
	profiling sync.WaitGroup
}

// startDctlB runs `dctl start` with its default settings (addresses aside:
// free loopback ports) plus args, and waits until it is ready.
func startDctlB(b *testing.B, args ...string) *dctlProcess {
	b.Helper()
	return startDctlBin(b, dctlBin, args...)
}

// startDctlBin is startDctlB with the dctl binary at bin.
func startDctlBin(b *testing.B, bin string, args ...string) *dctlProcess {
	b.Helper()
	health := benchFreeAddr(b)
	p := &dctlProcess{logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	full := []string{"start", "--kubeconfig", kubeconfig, "--health-addr", health, "--metrics-addr", "0",
		"--api-server-addr", "127.0.0.1:0"}
	if os.Getenv(benchPprofDirEnv) != "" {
		p.pprof = benchFreeAddr(b)
		full = append(full, "--pprof-address", p.pprof)
	}
	p.cmd = exec.Command(bin, append(full, args...)...)
	p.runUntilReady(b, "dctl start", health)
	return p
}

// runUntilReady starts p.cmd with its output in p.logs and waits up to
// 30 s until the process's /readyz on the health address answers 200;
// the benchmark fails (with the process's output) when it exits first or
// is not ready in time.
func (p *dctlProcess) runUntilReady(b *testing.B, name, health string) {
	b.Helper()
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + health + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-p.exited:
			b.Fatalf("%s exited: %v\n%s", name, err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			_ = p.cmd.Process.Kill()
			b.Fatalf("%s not ready after 30s\n%s", name, p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peakRSS is the process's peak resident set size in bytes (VmHWM). It
// counts the pages of the binary's file mapped into the process (RssFile:
// code and read-only data, shared with the page cache) as well as its own
// memory (RssAnon).
func (p *dctlProcess) peakRSS(b *testing.B) int64 {
	b.Helper()
	return p.status(b, "VmHWM:")
}

// cpuTime is the CPU time (user and system) the process has used (see
// parseStat).
func (p *dctlProcess) cpuTime(b *testing.B) time.Duration {
	b.Helper()
	return p.stat(b).cpu
}

// stat reads the process's /proc/PID/stat (see parseStat).
func (p *dctlProcess) stat(b *testing.B) procStat {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	st, err := parseStat(stat)
	if err != nil {
		b.Fatalf("/proc/%d/stat: %v", p.cmd.Process.Pid, err)
	}
	return st
}

// procStat is what the benchmarks read of a /proc/PID/stat: the command
// name, the parent's PID, the CPU time (user and system), and the page
// faults: minor, and major (a page read from a file, such as the
// executable's code and read-only data after the manager released them).
type procStat struct {
	comm, ppid   string
	cpu          time.Duration
	minor, major int64
}

// parseStat reads a /proc/PID/stat (proc(5)): fields 2 (the command name,
// in parentheses, which may hold spaces), 4 (ppid), 10 (minflt), 12
// (majflt), 14 and 15 (utime and stime, in USER_HZ ticks: clockTicks).
func parseStat(stat []byte) (procStat, error) {
	open, closing := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return procStat{}, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(string(stat[closing+1:]))
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("%d fields after the command name", len(f))
	}
	var n [4]int64
	for i, field := range []int{7, 9, 11, 12} {
		v, err := strconv.ParseInt(f[field], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("field %d: %w", field+3, err)
		}
		n[i] = v
	}
	return procStat{comm: string(stat[open+1 : closing]), ppid: f[1], minor: n[0], major: n[1],
		cpu: time.Duration(n[2]+n[3]) * time.Second / clockTicks}, nil
}

// status reads a size field of the process's /proc/PID/status ("VmHWM:",
// "RssAnon:") in bytes.
func (p *dctlProcess) status(b *testing.B, field string) int64 {
	b.Helper()
	n, err := procStatus(p.cmd.Process.Pid, field)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// procStatus reads a size field of /proc/PID/status in bytes.
func procStatus(pid int, field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// sampleAnon samples the process's RssAnon (its own memory, without the
// binary's file pages) every 20ms until the returned function is called,
// which returns the largest sample in bytes.
func (p *dctlProcess) sampleAnon() (peak func() int64) {
	var high atomic.Int64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := procStatus(p.cmd.Process.Pid, "RssAnon:"); err == nil && n > high.Load() {
				high.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return high.Load()
	}
}

// profile saves, in the background, a CPU profile of the next d, then a
// heap profile, an execution trace of the next second (`go tool trace`:
// where a start waits) and the goroutines' stacks at d/2 to
// DCTL_BENCH_PPROF_DIR, named after name; nothing when the variable is
// unset. The process's stop waits until they are saved.
func (p *dctlProcess) profile(b *testing.B, name string, d time.Duration) {
	dir := os.Getenv(benchPprofDirEnv)
	if dir == "" || p.pprof == "" {
		return
	}
	save := func(path, file string) {
		if err := savePprof(p.pprof, path, file); err != nil {
			b.Logf("pprof %s: %v", path, err)
		}
	}
	p.profiling.Go(func() {
		save(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), "cpu-"+name+".pprof")
		save("/debug/pprof/heap", "heap-"+name+".pprof")
	})
	p.profiling.Go(func() { save("/debug/pprof/trace?seconds=1", "trace-"+name+".out") })
	p.profiling.Go(func() {
		// Where the goroutines wait, halfway through the CPU profile.
		time.Sleep(d / 2)
		save("/debug/pprof/goroutine?debug=1", "goroutines-"+name+".txt")
	})
}

// profileAPIServer saves, in the background, a CPU profile of the test's
// kube-apiserver over the next d to DCTL_BENCH_PPROF_DIR as
// apiserver-<name>.pprof (its /debug/pprof, on by default); nothing when the
// variable is unset.
func profileAPIServer(b *testing.B, name string, d time.Duration) {
	dir := os.Getenv(benchPprofDirEnv)
	if dir == "" {
		return
	}
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		raw, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "apiserver-"+name+".pprof"), raw, 0o644)
		}
		if err != nil {
			b.Logf("kube-apiserver pprof: %v", err)
		}
	}()
}

// waitControlPlaneQuiet waits, up to 10 s, until the processes this test started (the
// control plane, kube-controller-manager, a dctl) use less than a tenth of
// a core over 200 ms: a timed phase starts after what the setup before it
// (creating, patching or deleting thousands of pods) left the control
// plane to do, not in the middle of it.
func waitControlPlaneQuiet(b *testing.B) {
	b.Helper()
	total := func() time.Duration {
		var t time.Duration
		for _, d := range childCPU(b) {
			t += d
		}
		return t
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := total()
		time.Sleep(200 * time.Millisecond)
		if total()-before < 20*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			b.Logf("the control plane was still busy after 10s; timing anyway")
			return
		}
	}
}

// phaseCPU is the CPU time used so far by the processes a timed phase is
// judged by: the test's control plane (the kube-apiserver and etcd
// processes this test process started, together and etcd alone),
// kube-controller-manager and this process, and the machine's steal time
// (stealTime); one reading of /proc.
type phaseCPU struct{ controlPlane, etcd, kcm, self, steal time.Duration }

func readPhaseCPU(b *testing.B) phaseCPU {
	b.Helper()
	c := childCPU(b)
	if _, ok := c["kube-apiserver"]; !ok {
		b.Fatal("no kube-apiserver process started by this test")
	}
	if _, ok := c["etcd"]; !ok {
		b.Fatal("no etcd process started by this test")
	}
	return phaseCPU{controlPlane: c["kube-apiserver"] + c["etcd"], etcd: c["etcd"], kcm: c["kube-controller"], self: selfCPU(b),
		steal: stealTime(b)}
}

// stealTime is the time the machine's virtual CPUs have waited, since
// boot, while the hypervisor ran something else, summed over the CPUs:
// the "steal" column of /proc/stat's cpu line, in USER_HZ ticks
// (clockTicks; proc(5)). A phase with steal runs every process slower in wall time;
// the kernel does not charge stolen time to the processes' CPU time.
func stealTime(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		b.Fatalf("/proc/stat: steal column %q: %v", f[8], err)
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// since is the CPU time used between p0 and p.
func (p phaseCPU) since(p0 phaseCPU) phaseCPU {
	return phaseCPU{p.controlPlane - p0.controlPlane, p.etcd - p0.etcd, p.kcm - p0.kcm, p.self - p0.self, p.steal - p0.steal}
}

// childCPU is the CPU time (user and system) each process this test
// process started has used so far, by command name (several of one name
// summed), from /proc/PID/stat (see parseStat).
func childCPU(b *testing.B) map[string]time.Duration {
	b.Helper()
	out := map[string]time.Duration{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		if st, err := parseStat(stat); err == nil && st.ppid == self {
			out[st.comm] += st.cpu
		}
	}
	return out
}

// selfCPU is the CPU time this test process has used so far.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	d, ok := cputime.Process()
	if !ok {
		b.Fatal("no CPU time of the test process on this platform")
	}
	return d
}

// saveAllocs saves the allocation profile of the process so far (every
// allocation since its start, sampled) to DCTL_BENCH_PPROF_DIR as
// allocs-<name>.pprof; nothing when the variable is unset.
func (p *dctlProcess) saveAllocs(b *testing.B, name string) {
	dir := os.Getenv(benchPprofDirEnv)
	if dir == "" || p.pprof == "" {
		return
	}
	if err := savePprof(p.pprof, "/debug/pprof/allocs", "allocs-"+name+".pprof"); err != nil {
		b.Logf("pprof allocs: %v", err)
	}
}

// savePprof saves the answer to GET http://addr+path (a pprof endpoint)
// as file in DCTL_BENCH_PPROF_DIR.
func savePprof(addr, path, file string) error {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(os.Getenv(benchPprofDirEnv), file), data, 0o644)
}

// stop waits for the profile downloads under way, then ends the process with
// SIGTERM and waits for it.
func (p *dctlProcess) stop(b *testing.B) {
	b.Helper()
	p.profiling.Wait()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		b.Errorf("dctl start did not stop within 30s of SIGTERM")
	}
}

func benchFreeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serverRequests reads the API server's apiserver_request_total counters
// for the given resources (plural names, e.g. "configmaps"; none: every
// resource and non-resource path), summed by
// "VERB resource[/subresource]", from its /metrics endpoint. The
// difference of two readings is what was sent in between (by every
// client).
func serverRequests(tb testing.TB, resources ...string) map[string]float64 {
	tb.Helper()
	out := map[string]float64{}
	for _, m := range serverMetric(tb, "apiserver_request_total") {
		lbl := labelsOf(m)
		if len(resources) > 0 && !slices.Contains(resources, lbl["resource"]) {
			continue
		}
		k := lbl["verb"] + " " + lbl["resource"]
		if lbl["subresource"] != "" {
			k += "/" + lbl["subresource"]
		}
		out[k] += m.GetCounter().GetValue()
	}
	return out
}

// serverWatches returns how many watches of resource (a plural name) the
// API server serves now, from every client (its
// apiserver_longrunning_requests gauge).
func serverWatches(tb testing.TB, resource string) int {
	tb.Helper()
	n := 0.0
	for _, m := range serverMetric(tb, "apiserver_longrunning_requests") {
		if lbl := labelsOf(m); lbl["verb"] == "WATCH" && lbl["resource"] == resource {
			n += m.GetGauge().GetValue()
		}
	}
	return int(n)
}

// serverMetric returns the samples of the metric family name from the API
// server's /metrics endpoint.
func serverMetric(tb testing.TB, name string) []*dto.Metric {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatalf("reading the API server's metrics: %v", err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("parsing the API server's metrics: %v", err)
	}
	fam := fams[name]
	if fam == nil {
		tb.Fatalf("the API server's metrics have no %s", name)
	}
	return fam.GetMetric()
}

func labelsOf(m *dto.Metric) map[string]string {
	lbl := map[string]string{}
	for _, l := range m.GetLabel() {
		lbl[l.GetName()] = l.GetValue()
	}
	return lbl
}

// requestsSince formats the requests counted between two readings of
// serverRequests, per parent, in key order ("POST configmaps 3.00, ...");
// a count below 0.01 per parent is given in all ("WATCH configmaps 1 in
// all").
func requestsSince(before, after map[string]float64, parents int) string {
	keys := slices.Sorted(maps.Keys(after))
	var parts []string
	for _, k := range keys {
		switch d := after[k] - before[k]; {
		case d <= 0:
		case d/float64(parents) < 0.01:
			parts = append(parts, fmt.Sprintf("%s %.0f in all", k, d))
		default:
			parts = append(parts, fmt.Sprintf("%s %.2f", k, d/float64(parents)))
		}
	}
	return strings.Join(parts, ", ")
}

// TestParseStat: the fields of a /proc/PID/stat line whose command name
// holds a space and a parenthesis.
func TestParseStat(t *testing.T) {
	line := []byte("4242 (dctl (x) y) S 17 4242 4242 0 -1 4194560 9553 0 710 3 64 7 0 0 20 0 9 0 123 0 0\n")
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{comm: "dctl (x) y", ppid: "17", minor: 9553, major: 710, cpu: 710 * time.Millisecond}
	if st != want {
		t.Fatalf("parseStat: %+v, want %+v", st, want)
	}
	if _, err := parseStat([]byte("4242 (dctl) S 17 4242")); err == nil {
		t.Fatal("parseStat of a short line: no error")
	}
}
