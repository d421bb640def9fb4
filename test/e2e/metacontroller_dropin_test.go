package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMetacontrollerDropIn runs dcontroller the way a Metacontroller
// StatefulSet does once only its image is replaced: on a cluster that has
// Metacontroller's CRDs but not the Operator CRD, started as
// /usr/bin/metacontroller (a link to dctl) with the args of Metacontroller's
// production manifest and the kubeconfig from the environment. The manager
// starts, says that Operators are off, and runs a CompositeController.
// (This second control plane runs no kube-controller-manager: nothing here
// is deleted.)
func TestMetacontrollerDropIn(t *testing.T) {
	binDir := filepath.Join(repoRoot, "bin", "k8s")
	env := &envtest.Environment{
		BinaryAssetsDirectory: binDir,
		CRDDirectoryPaths: []string{
			filepath.Join(repoRoot, "config", "crd", "metacontroller.k8s.io_compositecontrollers.yaml"),
			filepath.Join(repoRoot, "config", "crd", "metacontroller.k8s.io_decoratorcontrollers.yaml"),
			filepath.Join(repoRoot, "config", "crd", "metacontroller.k8s.io_controllerrevisions.yaml"),
		},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := env.Start(); err != nil {
		t.Fatalf("starting a second control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	k := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kc}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := combinedOutputBounded(cmd)
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out, _ := combinedOutputBounded(exec.Command(kubectlBin, "--kubeconfig", kc, "get", "crd", "operators.dcontroller.io")); !strings.Contains(string(out), "NotFound") {
		t.Fatalf("the second control plane has the Operator CRD: %s", out)
	}

	// Metacontroller's image runs /usr/bin/metacontroller.
	mc := filepath.Join(dir, "usr", "bin", "metacontroller")
	if err := os.MkdirAll(filepath.Dir(mc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dctlBin, mc); err != nil {
		t.Fatal(err)
	}
	health := freeAddr(t)
	logs, alive := startProcess(t, mc, []string{"--zap-log-level=4", "--discovery-interval=20s",
		"--metrics-address=0", "--health-probe-bind-address=" + health}, []string{"KUBECONFIG=" + kc})

	h := newHookServer(t, func(req map[string]any) any {
		return map[string]any{"status": map[string]any{"ok": true}, "children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": str(path(req, "parent.metadata.name")) + "-cm"},
			"data":     map[string]any{"from": "hook"},
		}}}
	})
	k(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: dropins.e2e.dcontroller.io}
spec:
  group: e2e.dcontroller.io
  scope: Namespaced
  names: {kind: DropIn, plural: dropins, singular: dropin, listKind: DropInList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, "apply", "-f", "-")
	k("", "wait", "--for=condition=Established", "--timeout=60s", "crd/dropins.e2e.dcontroller.io")
	k(fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: dropin-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: dropins}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL), "apply", "-f", "-")
	k("apiVersion: e2e.dcontroller.io/v1\nkind: DropIn\nmetadata: {name: d, namespace: default}\nspec: {}\n", "apply", "-f", "-")

	deadline := time.Now().Add(60 * time.Second)
	for {
		alive()
		out, err := combinedOutputBounded(exec.Command(kubectlBin, "--kubeconfig", kc, "-n", "default", "get", "configmap", "d-cm", "-o", "jsonpath={.data.from}"))
		if err == nil && string(out) == "hook" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child d-cm (%s); logs:\n%.5000s", out, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, _ := flagsGet("http://" + health + "/readyz"); code != 200 {
		t.Errorf("/readyz on the Metacontroller probe address: %d", code)
	}
	if !strings.Contains(logs.String(), "Operator support and the view API server are off") {
		t.Errorf("the log does not say that Operators are off:\n%.3000s", logs.String())
	}
}
