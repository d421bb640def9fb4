package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAPIServerStandalone runs `dctl run --standalone` with no cluster at
// all (KUBECONFIG points nowhere) and drives the seed README's getting
// started with kubectl against its API server: Pods created with kubectl run
// and kubectl apply get their container-number annotation, a re-applied Pod
// is patched with kubectl's strategic merge patch (list merge keys of the
// built-in Pod type), and Pods outside the operator's namespace are left
// alone.
func TestAPIServerStandalone(t *testing.T) {
	dir := t.TempDir()
	op := filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml")
	writeFile(t, filepath.Join(dir, "cm.yaml"), `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: cm-keys
spec:
  controllers:
    - name: count
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {keys: {"@len": {"@definedOr": ["$.data", {}]}}}
      target: {kind: KeyCount}
`)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "no-such-kubeconfig")}, "run", "--standalone", "-f", op, "-f", "cm.yaml")
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--insecure", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	k := func(stdin string, args ...string) (string, error) { return viewKubectl(t, dir, cfg, stdin, args...) }
	mk := func(stdin string, args ...string) string { return mustViewKubectl(t, dir, cfg, stdin, args...) }

	eventually(t, 20*time.Second, func() string {
		out, err := k("", "api-resources", "--no-headers")
		if err != nil || !strings.Contains(out, "pods") || !strings.Contains(out, "po ") {
			return fmt.Sprintf("api-resources: %q %v", out, err)
		}
		return ""
	})
	if out := mk("", "api-resources", "--no-headers"); strings.Contains(out, "deployments") {
		t.Errorf("a kind no operator uses is served:\n%s", out)
	}
	annotation := func(ns, name string) func() string {
		return func() string {
			out, err := k("", "-n", ns, "get", "pod", name, "-o", `jsonpath={.metadata.annotations.dcontroller\.io/container-num}`)
			if err != nil {
				return err.Error()
			}
			return out
		}
	}
	wait := func(ns, name, want string) {
		t.Helper()
		eventually(t, 20*time.Second, func() string {
			if got := annotation(ns, name)(); got != want {
				return fmt.Sprintf("%s/%s annotation %q, want %q", ns, name, got, want)
			}
			return ""
		})
	}
	mk("", "run", "net-debug", "--image=docker.io/l7mp/net-debug:latest")
	wait("default", "net-debug", "1")

	mk(podYAML("net-debug-2", "default", 3), "apply", "-f", "-")
	wait("default", "net-debug-2", "3")
	// Re-applying with fewer containers sends a strategic merge patch that
	// deletes the dropped containers by their merge key (name).
	mk(podYAML("net-debug-2", "default", 2), "apply", "-f", "-")
	wait("default", "net-debug-2", "2")
	if out := mk("", "get", "po", "net-debug-2", "-o", "jsonpath={.spec.containers[*].name}"); out != "c1 c2" {
		t.Errorf("containers after re-apply: %q", out)
	}

	mk(podYAML("elsewhere", "other", 2), "apply", "-f", "-")
	time.Sleep(2 * time.Second)
	if got := annotation("other", "elsewhere")(); got != "" {
		t.Errorf("pod outside the operator's namespace annotated: %q", got)
	}
	if out := mk("", "get", "pods", "-A", "--no-headers"); strings.Count(out, "\n") != 3 {
		t.Errorf("pods:\n%s", out)
	}
	mk("", "delete", "pod", "net-debug")
	if _, err := k("", "get", "pod", "net-debug"); err == nil || !strings.Contains(err.Error(), `pods "net-debug" not found`) {
		t.Errorf("get after delete: %v", err)
	}
	// kubectl create configmap sends protobuf; the view follows.
	mk("", "create", "configmap", "settings", "--from-literal=a=1", "--from-literal=b=2")
	eventually(t, 20*time.Second, func() string {
		out, err := k("", "get", "keycounts.cm-keys.view.dcontroller.io", "settings", "-o", "jsonpath={.spec.keys}")
		if err != nil || out != "2" {
			return fmt.Sprintf("keycount %q (err %v)", out, err)
		}
		return ""
	})
	if !strings.Contains(srv.logs.String(), "not a Kubernetes cluster") {
		t.Errorf("standalone mode does not say it is a development store; logs:\n%s", srv.logs.String())
	}
}
