package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dcontroller/dcontroller/internal/testcontrolplane"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

var (
	dctlBin    string
	repoRoot   string
	kubectlBin string
	kubeconfig string
	restConfig *rest.Config
	k8sClient  client.Client
	// kcm is the kube-controller-manager that runs beside the suite's
	// kube-apiserver (garbage collector, namespace lifecycle, ...).
	kcm *controllerManager
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	binDir := filepath.Join(repoRoot, "bin", "k8s")
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is missing; run 'make kube-binaries' (make test does it)\n", filepath.Join(binDir, b))
			return 1
		}
	}
	kubectlBin = filepath.Join(binDir, "kubectl")
	flag.Parse() // for checkBenchCounts; m.Run would parse them
	if err := checkBenchCounts(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 2
	}
	if dir := os.Getenv(benchPprofDirEnv); dir != "" {
		// The profiles' directory is made when missing, as `go test
		// -cpuprofile` does not: a typo would lose every profile.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s: %v\n", benchPprofDirEnv, err)
			return 1
		}
	}
	// What the run starts and makes goes also when it is interrupted
	// (Ctrl-C): etcd and kube-apiserver run in process groups of their own.
	var teardown testcontrolplane.Teardown
	defer teardown.Run()
	defer testcontrolplane.OnInterrupt("e2e", &teardown)()
	tmpBin, err := os.MkdirTemp("", "dcontroller-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	teardown.Add(func() { _ = os.RemoveAll(tmpBin) })
	dctlBin = filepath.Join(tmpBin, "dctl")
	build := exec.Command("go", "build", "-o", dctlBin, "./cmd/dctl")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building dctl: %v\n%s", err, out)
		return 1
	}
	if err := checkBenchDctlArgs(dctlBin); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 2
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel), zap.StacktraceLevel(zapcore.DPanicLevel)))

	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	teardown.Add(func() { _ = env.Stop() })
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the control plane: %v\n", err)
		return 1
	}
	restConfig = cfg
	scheme, err := operator.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if k8sClient, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "dcontroller-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	teardown.Add(func() { _ = os.RemoveAll(dir) })
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A real cluster runs a controller manager: without one, nothing
	// deletes the objects of a deleted owner or a deleted namespace.
	started := time.Now()
	if kcm, err = startControllerManager(env, dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: kube-controller-manager healthy after %s\n", time.Since(started).Round(time.Millisecond))
	teardown.Add(func() {
		if err := kcm.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n%s", err, kcm.logTail())
		}
	})
	return m.Run()
}

// startManager runs a manager (the same code as `dctl start`) until the test
// or the returned stop function ends it.
func startManager(t *testing.T) (stop func()) {
	t.Helper()
	return startManagerWith(t, operator.ManagerOptions{})
}

// startManagerWith is startManager with options (e.g. a metrics address).
func startManagerWith(t *testing.T, opts operator.ManagerOptions) (stop func()) {
	t.Helper()
	return startManagerFor(t, restConfig, opts)
}

// startManagerFor is startManagerWith under another client configuration
// (e.g. a ServiceAccount's).
func startManagerFor(t *testing.T, cfg *rest.Config, opts operator.ManagerOptions) (stop func()) {
	t.Helper()
	stop, _ = startManagerRuntimeFor(t, cfg, opts)
	return stop
}

// managerStopTimeout bounds the stop of a manager started by
// startManagerRuntimeFor: controller-runtime's graceful shutdown (30s)
// and the Runtime's stop.
const managerStopTimeout = 90 * time.Second

// startManagerRuntimeFor is startManagerFor that also returns the
// manager's operator Runtime.
func startManagerRuntimeFor(t *testing.T, cfg *rest.Config, opts operator.ManagerOptions) (stop func(), rt *operator.Runtime) {
	t.Helper()
	log := ctrl.Log.WithName(t.Name())
	opts.Logger = log
	mgr, rt, err := operator.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &operator.Reconciler{Client: mgr.GetClient(), Runtime: rt, Logger: log, Recorder: mgr.GetEventRecorder("dcontroller")}
	if err := rec.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := metacontroller.Setup(ctx, mgr, metacontroller.Options{Logger: log}); err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
		rt.Stop()
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			stopped := make(chan struct{})
			go func() { wg.Wait(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(managerStopTimeout):
				// Left running: the other tests go on, and the stacks say
				// what holds it.
				buf := make([]byte, 1<<22)
				t.Errorf("the manager did not stop within %s of its context's cancellation; goroutines:\n%s",
					managerStopTimeout, buf[:runtime.Stack(buf, true)])
			}
		})
	}
	t.Cleanup(stop)
	return stop, rt
}

// kubectl runs the built kubectl against the test cluster.
func kubectl(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	return kubectlB(stdin, args...)
}

// runDctl runs the dctl binary built from this tree against the test cluster.
func runDctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(dctlBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runBounded(cmd); err != nil {
		return out.String(), fmt.Errorf("dctl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// kubectlB runs the built kubectl (usable from benchmarks).
func kubectlB(stdin string, args ...string) (string, error) {
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := runBounded(cmd); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls cond until it returns "" (success) or the timeout passes;
// the last message is the failure.
func eventually(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var msg string
	for {
		if msg = cond(); msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", timeout, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteOperatorsAtCleanup deletes the named Operators when the test ends
// (before the test's manager stops, when registered after it starts):
// every later test's manager runs all Operators the cluster holds, so one
// left behind costs later tests its informers and views (and skews what
// they measure of the process).
func deleteOperatorsAtCleanup(t *testing.T, names ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, name := range names {
			_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", name, "--ignore-not-found", "--wait=true", "--timeout=30s")
		}
	})
}
