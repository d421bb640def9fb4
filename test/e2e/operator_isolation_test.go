package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

// gadgetCRD serves kind Gadget in v1 (the storage version) and v2, converted
// by a webhook whose service does not exist: an object stored as v1 cannot
// be read as v2, so a list of v2 fails and an informer of v2 never syncs.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.isolation.e2e.dcontroller.io
spec:
  group: isolation.e2e.dcontroller.io
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    - name: v2
      served: true
      storage: false
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {namespace: default, name: no-such-conversion-webhook, path: /convert, port: 443}
`

// startManagerRuntime is startManager that also returns the manager's
// operator Runtime.
func startManagerRuntime(t *testing.T) *operator.Runtime {
	t.Helper()
	_, rt := startManagerRuntimeFor(t, restConfig, operator.ManagerOptions{})
	return rt
}

// readyConditions returns "status/reason" of each controller's Ready condition in
// the Operator's status, "op/controller=status/reason" separated by spaces.
func readyConditions(t *testing.T, op string) string {
	t.Helper()
	out, err := kubectl(t, "", "get", "operators.dcontroller.io", op, "-o",
		`jsonpath={range .status.controllers[*]}{.name}={.conditions[?(@.type=="Ready")].status}/{.conditions[?(@.type=="Ready")].reason} {end}`)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

// TestOperatorIsolation: an Operator whose source never syncs (its list
// fails on a conversion webhook that does not exist) holds back no other
// Operator. While its start waits for the informer (up to
// operator.InformerSyncTimeout, a minute), a second Operator starts and
// writes its target within seconds, the status of both is written and
// read at once (the waiting controller says Starting), and deleting the
// stuck Operator stops it at once.
func TestOperatorIsolation(t *testing.T) {
	mustKubectl(t, gadgetCRD, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "crd", "gadgets.isolation.e2e.dcontroller.io", "--wait=false") })
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/gadgets.isolation.e2e.dcontroller.io")
	for _, ns := range []string{"e2e-isolation", "e2e-isolation-out"} {
		mustKubectl(t, "", "create", "namespace", ns)
	}
	// Stored as v1: no conversion on the way in.
	mustKubectl(t, `apiVersion: isolation.e2e.dcontroller.io/v1
kind: Gadget
metadata: {name: g, namespace: e2e-isolation}
spec: {size: 1}
`, "create", "-f", "-")
	// The real API server cannot list v2.
	if out, err := kubectl(t, "", "get", "gadgets.v2.isolation.e2e.dcontroller.io", "-A", "--request-timeout=20s"); err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("listing Gadgets as v2 should fail on the conversion webhook; got %q, %v", out, err)
	}

	rt := startManagerRuntime(t)
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "isolation-stuck", "isolation-healthy", "--ignore-not-found", "--wait=false")
	})
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: isolation-stuck
spec:
  controllers:
    - name: gadgets
      sources: [{apiGroup: isolation.e2e.dcontroller.io, version: v2, kind: Gadget}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: "$.spec"
      target: {kind: GadgetCopy}
`, "apply", "-f", "-")
	// The stuck start is visible at once, in the Runtime and in the
	// Operator's status.
	eventually(t, 10*time.Second, func() string {
		st, ok := rt.Status("isolation-stuck", 1)
		if !ok || len(st.Controllers) != 1 || st.Controllers[0].Conditions[0].Reason != operator.ReasonStarting {
			return fmt.Sprintf("runtime status of isolation-stuck: %+v %v", st, ok)
		}
		if got := readyConditions(t, "isolation-stuck"); got != "gadgets=False/Starting" {
			return "status of isolation-stuck: " + got
		}
		return ""
	})

	// More stuck Operators than the manager has reconcile workers: their
	// starts go on in the background, and none holds a worker.
	for i := 1; i <= operator.DefaultWorkers+1; i++ {
		name := fmt.Sprintf("isolation-stuck-%d", i)
		t.Cleanup(func() {
			_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", name, "--ignore-not-found", "--wait=false")
		})
		mustKubectl(t, fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  controllers:
    - name: gadgets
      sources: [{apiGroup: isolation.e2e.dcontroller.io, version: v2, kind: Gadget}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
      target: {kind: GadgetCopy%d}
`, name, i), "apply", "-f", "-")
	}

	applied := time.Now()
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: isolation-healthy
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-isolation}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: e2e-isolation-out}
          data: {copy: "$.data.v"}
      target: {apiGroup: "", kind: ConfigMap}
`, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-isolation", "create", "configmap", "cm", "--from-literal=v=x")
	eventually(t, 10*time.Second, func() string {
		out, err := kubectl(t, "", "-n", "e2e-isolation-out", "get", "configmap", "cm", "-o", "jsonpath={.data.copy}")
		if err != nil || out != "x" {
			return fmt.Sprintf("target cm: %q %v", out, err)
		}
		return ""
	})
	if d := time.Since(applied); d > 10*time.Second {
		t.Errorf("the healthy operator wrote its target %s after it was applied", d)
	}
	t.Logf("the healthy operator wrote its target %s after it was applied", time.Since(applied).Round(time.Millisecond))
	eventually(t, 10*time.Second, func() string {
		if got := readyConditions(t, "isolation-healthy"); got != "copy=True/Ready" {
			return "status of isolation-healthy: " + got
		}
		return ""
	})

	// dctl status answers at once for both.
	began := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	cmd := exec.CommandContext(sctx, dctlBin, "status", "isolation-stuck", "isolation-healthy", "--color=never")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("dctl status: %v", err)
	}
	out := string(outb)
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("dctl status took %s", d)
	}
	var stuckLine, healthyLine string
	for _, l := range strings.Split(out, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 3 && f[0] == "isolation-stuck":
			stuckLine = l
		case len(f) > 3 && f[0] == "isolation-healthy":
			healthyLine = l
		}
	}
	if f := strings.Fields(stuckLine); len(f) < 4 || f[2] != "False" || f[3] != "Starting" {
		t.Errorf("dctl status: isolation-stuck line %q, want False Starting\n%s", stuckLine, out)
	}
	if f := strings.Fields(healthyLine); len(f) < 4 || f[2] != "True" || f[3] != "Ready" {
		t.Errorf("dctl status: isolation-healthy line %q, want True Ready\n%s", healthyLine, out)
	}
	// Still waiting for its informer, well before InformerSyncTimeout.
	if st, ok := rt.Status("isolation-stuck", 1); !ok || st.Controllers[0].Conditions[0].Reason != operator.ReasonStarting {
		t.Fatalf("isolation-stuck is no longer starting (%+v %v): the test ran too slowly to show the wait", st, ok)
	}

	// A new generation of the stuck operator (still stuck: another
	// target) replaces the start under way at once.
	mustKubectl(t, "", "patch", "operators.dcontroller.io", "isolation-stuck", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/controllers/0/target/kind","value":"GadgetCopy2"}]`)
	eventually(t, 10*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "isolation-stuck", "-o",
			`jsonpath={.status.controllers[0].conditions[0].observedGeneration}/{.status.controllers[0].conditions[0].reason}`)
		if err != nil || out != "2/Starting" {
			return fmt.Sprintf("status of isolation-stuck: %q %v, want generation 2 Starting", out, err)
		}
		return ""
	})

	// Deleting the stuck operator cancels its start at once.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "isolation-stuck", "--timeout=10s")
	eventually(t, 10*time.Second, func() string {
		if _, ok := rt.Status("isolation-stuck", 0); ok {
			return "isolation-stuck still runs"
		}
		return ""
	})
	// The healthy operator still runs and follows its changes.
	mustKubectl(t, "", "-n", "e2e-isolation", "patch", "configmap", "cm", "--type=merge", "-p", `{"data":{"v":"y"}}`)
	eventually(t, 10*time.Second, func() string {
		out, err := kubectl(t, "", "-n", "e2e-isolation-out", "get", "configmap", "cm", "-o", "jsonpath={.data.copy}")
		if err != nil || out != "y" {
			return fmt.Sprintf("target cm after the change: %q %v", out, err)
		}
		return ""
	})
	// Other tests' Operators may run on the same API server too.
	if names := rt.Names(); slices.Contains(names, "isolation-stuck") || !slices.Contains(names, "isolation-healthy") {
		t.Errorf("running operators %v, want isolation-healthy and not isolation-stuck", names)
	}

	// When the wait times out, the status says why the informer does not
	// sync: the list error (here the conversion webhook's), not only the
	// timeout.
	eventually(t, operator.InformerSyncTimeout+30*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "isolation-stuck-1", "-o",
			`jsonpath={.status.controllers[0].conditions[0].reason}: {.status.controllers[0].conditions[0].message}`)
		if err != nil || !strings.HasPrefix(out, operator.ReasonStartFailed+": ") || !strings.Contains(out, "last list/watch error") || !strings.Contains(out, "conversion webhook") {
			return fmt.Sprintf("status of isolation-stuck-1: %q %v", out, err)
		}
		return ""
	})
}
