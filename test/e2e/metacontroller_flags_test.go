package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// startDctlBinary runs the dctl binary built from this tree with args
// (after "start --kubeconfig"), stopping it with SIGTERM when the test
// ends. alive fails the test if the process has exited.
func startDctlBinary(t *testing.T, args ...string) (logs *bytes.Buffer, alive func() string) {
	t.Helper()
	return startProcess(t, dctlBin, append([]string{"start", "--kubeconfig", kubeconfig}, args...), nil)
}

// startProcess runs the program at bin with args and extra environment
// variables, its output in logs, and stops it with SIGTERM (SIGKILL after
// 30s) when the test ends. alive fails the test if the process has exited.
func startProcess(t *testing.T, bin string, args, env []string) (logs *bytes.Buffer, alive func() string) {
	t.Helper()
	logs = &bytes.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	return logs, func() string {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited (%v); logs:\n%.5000s", filepath.Base(bin), err, logs.String())
		default:
		}
		return ""
	}
}

// flagsGet returns the status code and body of a GET (0 and the error when
// nothing answers).
func flagsGet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// flagsHookChildren answers a sync with two ConfigMaps named after the
// parent, asks for a resync after 0.3s, and finalizes at once.
func flagsHookChildren(req map[string]any) any {
	if b, _ := req["finalizing"].(bool); b {
		return map[string]any{"finalized": true}
	}
	name := str(path(req, "parent.metadata.name"))
	var children []any
	for i := 0; i < 2; i++ {
		children = append(children, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, i), "labels": map[string]any{"app": name}},
			"data":     map[string]any{"value": str(path(req, "parent.spec.value"))}})
	}
	return map[string]any{"children": children, "status": map[string]any{"ok": true}, "resyncAfterSeconds": 0.3}
}

// flagsController is a CompositeController of plural's parents in
// namespace e2e-mcflags with ConfigMap children, a sync and a finalize
// hook; labels are its metadata.labels (YAML flow map).
func flagsController(name, plural, labels, url string) string {
	return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s, labels: %s}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: %s}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync: {webhook: {url: %s}}
    finalize: {webhook: {url: %s}}
`, name, labels, plural, url, url)
}

// TestMetacontrollerFlagsBinary runs the real `dctl start` with the args
// of a Metacontroller Deployment: with --target-label-selector only the
// labelled CompositeController runs (the other gets no status, no hook
// call, its parent no children and no finalizer, until it is labelled);
// with --apply-strategy=server-side-apply the children are created and
// kept by server-side apply under the given field manager, and resyncs
// that leave the desired children as they are write nothing; pprof is
// served at --pprof-address.
func TestMetacontrollerFlagsBinary(t *testing.T) {
	installCRD(t, "FlagsParentA", "flagsparentas", "Namespaced")
	installCRD(t, "FlagsParentB", "flagsparentbs", "Namespaced")
	mustKubectl(t, "", "create", "namespace", "e2e-mcflags")
	hookA := newHookServer(t, flagsHookChildren)
	hookB := newHookServer(t, flagsHookChildren)
	// The controller outside the selector and its parent exist first.
	applyMC(t, flagsController("flags-other", "flagsparentbs", "{team: other}", hookB.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: FlagsParentB
metadata: {name: pb, namespace: e2e-mcflags}
spec: {value: b}
`, "apply", "-f", "-")

	health, metrics, pprof := freeAddr(t), freeAddr(t), freeAddr(t)
	logs, alive := startDctlBinary(t,
		"--zap-log-level=info",
		"--discovery-interval=5s",
		"--cache-flush-interval=30m",
		"--metrics-address="+metrics,
		"--health-probe-bind-address="+health,
		"--client-go-qps=50",
		"--client-go-burst=100",
		"--workers=3",
		"--events-qps=0.5",
		"--events-burst=20",
		"--leader-election",
		"--leader-election-resource-lock=leases",
		"--leader-election-namespace=default",
		"--leader-election-id=e2e-mcflags",
		"--pprof-address="+pprof,
		"--target-label-selector=controller-group in (cicd)",
		"--apply-strategy=server-side-apply",
		"--apply-strategy-ssa-field-manager=team-x",
		"--api-server-addr=127.0.0.1:0")
	eventually(t, 30*time.Second, func() string {
		if code, body := flagsGet("http://" + health + "/readyz"); code != 200 {
			return fmt.Sprintf("readyz: %d %s", code, body)
		}
		return alive()
	})
	if code, body := flagsGet("http://" + pprof + "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("--pprof-address: /debug/pprof/ answered %d %.300s", code, body)
	}

	applyMC(t, flagsController("flags-cicd", "flagsparentas", "{controller-group: cicd}", hookA.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: FlagsParentA
metadata: {name: pa, namespace: e2e-mcflags}
spec: {value: a}
`, "apply", "-f", "-")
	child := func(name string) (*unstructured.Unstructured, error) {
		return getObj(t, "v1", "ConfigMap", "e2e-mcflags", name)
	}
	eventually(t, 60*time.Second, func() string {
		for _, n := range []string{"pa-0", "pa-1"} {
			if _, err := child(n); err != nil {
				return fmt.Sprintf("child %s: %v; logs:\n%.3000s", n, err, logs.String())
			}
		}
		return alive()
	})
	// Server-side apply under team-x created the children: one Apply
	// entry, no Update (a create or update would be one).
	for _, n := range []string{"pa-0", "pa-1"} {
		c, err := child(n)
		if err != nil {
			t.Fatal(err)
		}
		var entries []string
		for _, m := range c.GetManagedFields() {
			entries = append(entries, m.Manager+"/"+string(m.Operation))
		}
		if strings.Join(entries, ",") != "team-x/Apply" {
			t.Errorf("%s managedFields: %v, want team-x/Apply only", n, entries)
		}
		if refs := c.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "pa" || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%s ownerReferences: %+v", n, refs)
		}
	}

	// The hook asks for a resync every 0.3s with the same children: no
	// write to them (same resourceVersion after several calls).
	c0, _ := child("pa-0")
	rv0 := c0.GetResourceVersion()
	calls := hookA.calls.Load()
	eventually(t, 30*time.Second, func() string {
		if n := hookA.calls.Load(); n < calls+5 {
			return fmt.Sprintf("%d resync calls so far", n-calls)
		}
		return alive()
	})
	if c, _ := child("pa-0"); c.GetResourceVersion() != rv0 {
		t.Errorf("an unchanged resync wrote the child: resourceVersion %s -> %s", rv0, c.GetResourceVersion())
	}
	// A changed desired child is applied (and only then written).
	mustKubectl(t, "", "-n", "e2e-mcflags", "patch", "flagsparentas", "pa", "--type=merge", "-p", `{"spec":{"value":"a2"}}`)
	eventually(t, 30*time.Second, func() string {
		c, err := child("pa-1")
		if err != nil || str(path(c.Object, "data.value")) != "a2" {
			return fmt.Sprintf("pa-1 data: %v (%v)", path(c.Object, "data"), err)
		}
		return alive()
	})

	// The controller outside the selector was never touched.
	cc, err := getObj(t, "metacontroller.k8s.io/v1alpha1", "CompositeController", "", "flags-other")
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := cc.Object["status"]; ok && len(st.(map[string]any)) > 0 {
		t.Errorf("unselected controller got a status: %v", st)
	}
	if n := hookB.calls.Load(); n != 0 {
		t.Errorf("unselected controller's hook called %d times", n)
	}
	pb, err := getObj(t, "e2e.dcontroller.io/v1", "FlagsParentB", "e2e-mcflags", "pb")
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.GetFinalizers()) > 0 || pb.Object["status"] != nil {
		t.Errorf("unselected controller's parent was written: finalizers %v status %v", pb.GetFinalizers(), pb.Object["status"])
	}
	if _, err := child("pb-0"); !isNotFound(err) {
		t.Errorf("unselected controller's parent has a child (err %v)", err)
	}

	// Labelled into the selector, it starts.
	mustKubectl(t, "", "label", "compositecontroller", "flags-other", "controller-group=cicd")
	eventually(t, 30*time.Second, func() string {
		if _, err := child("pb-0"); err != nil {
			return fmt.Sprintf("pb-0 after labelling: %v", err)
		}
		return alive()
	})

	// Delete the controllers while the manager runs (finalize hooks).
	for _, name := range []string{"flags-cicd", "flags-other"} {
		if _, err := kubectl(t, "", "delete", "compositecontroller", name, "--timeout=60s"); err != nil {
			t.Logf("deleting %s: %v", name, err)
		}
	}
}

// TestMetacontrollerFlagsPprofOff: without --pprof-address no profile is
// served, neither on the health nor the metrics address.
func TestMetacontrollerFlagsPprofOff(t *testing.T) {
	health, metrics := freeAddr(t), freeAddr(t)
	_, alive := startDctlBinary(t, "--health-probe-bind-address="+health, "--metrics-address="+metrics,
		"--api-server-addr=127.0.0.1:0")
	eventually(t, 30*time.Second, func() string {
		if code, body := flagsGet("http://" + health + "/readyz"); code != 200 {
			return fmt.Sprintf("readyz: %d %s", code, body)
		}
		return alive()
	})
	for _, addr := range []string{health, metrics} {
		if code, body := flagsGet("http://" + addr + "/debug/pprof/"); code == 200 {
			t.Errorf("%s serves /debug/pprof/ without --pprof-address: %.200s", addr, body)
		}
	}
}

// TestMetacontrollerFlagsHelp: `dctl start --help` lists Metacontroller's
// spellings, and two spellings of one setting with different values are
// refused before anything starts.
func TestMetacontrollerFlagsHelp(t *testing.T) {
	out, err := runDctl(t, "start", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"target-label-selector", "apply-strategy", "apply-strategy-ssa-field-manager", "client-go-qps",
		"client-go-burst", "workers", "discovery-interval", "cache-flush-interval", "metrics-address",
		"health-probe-bind-address", "leader-election", "leader-election-resource-lock", "leader-election-namespace",
		"leader-election-id", "events-qps", "events-burst", "pprof-address", "zap-log-level", "zap-devel"} {
		if !strings.Contains(out, "\n      --"+f+" ") {
			t.Errorf("--help does not list --%s", f)
		}
	}
	if !strings.Contains(out, "the same setting as --metrics-addr, in Metacontroller's spelling") {
		t.Errorf("--help does not say --metrics-address is --metrics-addr:\n%s", out)
	}
	_, err = runDctl(t, "start", "--metrics-addr=:8080", "--metrics-address=:9999")
	if err == nil || !strings.Contains(err.Error(), "--metrics-addr=:8080 and --metrics-address=:9999 are the same setting with different values") {
		t.Errorf("conflicting spellings: %v", err)
	}
}

// startSSAManager runs a manager whose hook controllers write children
// with server-side apply under fieldManager, until the test ends.
func startSSAManager(t *testing.T, fieldManager string) {
	t.Helper()
	log := ctrl.Log.WithName(t.Name())
	mgr, rt, err := operator.NewManager(restConfig, operator.ManagerOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := metacontroller.Setup(ctx, mgr, metacontroller.Options{Logger: log,
		ApplyStrategy: metacontroller.ServerSideApply, FieldManager: fieldManager}); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
		rt.Stop()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestMetacontrollerServerSideApplyStrategies: under server-side apply a
// Recreate child that differs is deleted and created again (new UID, by
// an apply), an InPlace child is applied in place (same UID), and a field
// of an InPlace child that someone else changed is set back by the next
// sync (forced ownership), while a field the desired child does not set
// is kept.
func TestMetacontrollerServerSideApplyStrategies(t *testing.T) {
	const ns = "e2e-mc-ssa"
	installCRD(t, "SSAParent", "ssaparents", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startSSAManager(t, "ssa-e2e")
	h := newHookServer(t, func(req map[string]any) any {
		v := str(path(req, "parent.spec.v"))
		return map[string]any{"children": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "ssa-cm"}, "data": map[string]any{"v": v}},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "ssa-secret"},
				"data": map[string]any{"v": base64.StdEncoding.EncodeToString([]byte(v))}},
		}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: ssa-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: ssaparents}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
    - apiVersion: v1
      resource: secrets
      updateStrategy: {method: Recreate}
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL))
	parent := func(v string) string {
		return "apiVersion: e2e.dcontroller.io/v1\nkind: SSAParent\nmetadata: {name: p, namespace: " + ns + "}\nspec: {v: \"" + v + "\"}\n"
	}
	mustKubectl(t, parent("1"), "apply", "-f", "-")
	get := func(kind, name string) *unstructured.Unstructured {
		u, err := getObj(t, "v1", kind, ns, name)
		if err != nil {
			return nil
		}
		return u
	}
	applied := func(u *unstructured.Unstructured) bool {
		for _, m := range u.GetManagedFields() {
			if m.Manager == "ssa-e2e" && m.Operation == "Apply" {
				return true
			}
		}
		return false
	}
	eventually(t, 30*time.Second, func() string {
		cm, sec := get("ConfigMap", "ssa-cm"), get("Secret", "ssa-secret")
		if cm == nil || sec == nil || str(path(cm.Object, "data.v")) != "1" || str(path(sec.Object, "data.v")) != "MQ==" {
			return "children not at v=1"
		}
		return ""
	})
	stable(t, h, time.Second)
	cm0, sec0 := get("ConfigMap", "ssa-cm"), get("Secret", "ssa-secret")

	mustKubectl(t, parent("2"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		cm, sec := get("ConfigMap", "ssa-cm"), get("Secret", "ssa-secret")
		switch {
		case sec == nil || sec.GetUID() == sec0.GetUID() || str(path(sec.Object, "data.v")) != "Mg==" || !applied(sec):
			return "ssa-secret not recreated by an apply at v=2"
		case cm == nil || cm.GetUID() != cm0.GetUID() || str(path(cm.Object, "data.v")) != "2" || !applied(cm):
			return "ssa-cm not applied in place at v=2"
		}
		return ""
	})
	stable(t, h, time.Second)

	// Someone else changes the applied field and adds one of their own.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "ssa-cm", "--type=merge", "-p", `{"data":{"v":"drift","other":"kept"}}`)
	eventually(t, 30*time.Second, func() string {
		cm := get("ConfigMap", "ssa-cm")
		if cm == nil || str(path(cm.Object, "data.v")) != "2" || str(path(cm.Object, "data.other")) != "kept" {
			return fmt.Sprintf("ssa-cm data: %v", path(cm.Object, "data"))
		}
		return ""
	})
	// Nothing left to write: the children stay as they are.
	cm1, sec1 := get("ConfigMap", "ssa-cm"), get("Secret", "ssa-secret")
	stable(t, h, 2*time.Second)
	if cm, sec := get("ConfigMap", "ssa-cm"), get("Secret", "ssa-secret"); cm.GetResourceVersion() != cm1.GetResourceVersion() ||
		sec.GetResourceVersion() != sec1.GetResourceVersion() {
		t.Errorf("children written with nothing changing")
	}
}
