package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startPythonHook runs examples/metacontroller-podservice/<script> with
// python3 and returns its base URL.
func startPythonHook(t *testing.T, script string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is required for the language-independence test: %v", err)
	}
	cmd := exec.Command(py, filepath.Join(repoRoot, "examples", "metacontroller-podservice", script), "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("python hook: %v", err)
	}
	var port int
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "listening on %d", &port); err != nil {
		t.Fatalf("python hook printed %q", line)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

func pythonCalls(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Calls int }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Calls
}

const podServiceCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: podservice-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: podservices
  childResources:
    - apiVersion: v1
      resource: pods
      updateStrategy: {method: InPlace}
    - apiVersion: v1
      resource: services
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook:
        url: %s/sync
`

func podServiceYAML(image string) string {
	return `apiVersion: e2e.dcontroller.io/v1
kind: PodService
metadata:
  name: web
  namespace: e2e-mc-python
spec:
  image: ` + image + `
  port: 8080
`
}

// TestMetacontrollerPythonPodService runs the seed tutorial's PodService
// controller with its sync hook written in Python (standard library only)
// and served by a subprocess: a parent gets a Pod and a Service, the
// status is written back, an image change updates the Pod in place, and
// nothing is called again once the state is reached.
func TestMetacontrollerPythonPodService(t *testing.T) {
	const ns = "e2e-mc-python"
	base := startPythonHook(t, "podservice_hook.py")
	installCRD(t, "PodService", "podservices", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	applyMC(t, fmt.Sprintf(podServiceCC, base))
	mustKubectl(t, podServiceYAML("nginx:1.25"), "apply", "-f", "-")

	check := func(image string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "PodService", ns, "web")
			if err != nil {
				return err.Error()
			}
			pod, err := getObj(t, "v1", "Pod", ns, "web-pod")
			if err != nil {
				return "pod: " + err.Error()
			}
			svc, err := getObj(t, "v1", "Service", ns, "web-svc")
			if err != nil {
				return "service: " + err.Error()
			}
			for _, o := range []map[string]any{pod.Object, svc.Object} {
				refs, _ := path(o, "metadata.ownerReferences").([]any)
				if len(refs) != 1 || str(path(refs[0].(map[string]any), "uid")) != string(p.GetUID()) {
					return fmt.Sprintf("owner references %v", refs)
				}
				if str(path(o, "metadata.labels.controller-uid")) != string(p.GetUID()) {
					return "no controller-uid label"
				}
			}
			containers, _ := path(pod.Object, "spec.containers").([]any)
			if len(containers) != 1 || str(path(containers[0].(map[string]any), "image")) != image {
				return fmt.Sprintf("pod containers %v", containers)
			}
			want := fmt.Sprintf("1 1 %s %d", image, p.GetGeneration())
			if got := fmt.Sprintf("%s %s %s %s", str(path(p.Object, "status.pods")), str(path(p.Object, "status.services")),
				str(path(p.Object, "status.image")), str(path(p.Object, "status.observedGeneration"))); got != want {
				return fmt.Sprintf("status %q, want %q", got, want)
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, check("nginx:1.25"))
	svc, _ := getObj(t, "v1", "Service", ns, "web-svc")
	if str(path(svc.Object, "spec.clusterIP")) == "" {
		t.Error("the API server's clusterIP is missing")
	}
	settle(t, func() int64 { return int64(pythonCalls(t, base)) })
	calls := pythonCalls(t, base)
	time.Sleep(2 * time.Second)
	if n := pythonCalls(t, base); n != calls {
		t.Fatalf("%d hook calls with nothing changing", n-calls)
	}

	pod, _ := getObj(t, "v1", "Pod", ns, "web-pod")
	mustKubectl(t, podServiceYAML("nginx:1.27"), "apply", "-f", "-")
	eventually(t, 30*time.Second, check("nginx:1.27"))
	pod2, _ := getObj(t, "v1", "Pod", ns, "web-pod")
	if pod2.GetUID() != pod.GetUID() {
		t.Error("the Pod was recreated; InPlace must update it")
	}
	svc2, _ := getObj(t, "v1", "Service", ns, "web-svc")
	if svc2.GetResourceVersion() != svc.GetResourceVersion() {
		t.Error("the unchanged Service was written")
	}
}
