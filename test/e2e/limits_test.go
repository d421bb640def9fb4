package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fanOutOperator unwinds two lists of data.size numbers: size² view objects from
// one ConfigMap, 10⁶ for size 1000.
const fanOutOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: fan-out
spec:
  controllers:
    - name: grid
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-limits, labelSelector: {matchLabels: {grid: "yes"}}}]
      pipeline:
        - "@project":
            metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
            a: {"@range": {"@int": "$.data.size"}}
            b: {"@range": {"@int": "$.data.size"}}
        - "@unwind": "$.a"
        - "@unwind": "$.b"
      target: {kind: Cell}
`

// keyCountOperator annotates every ConfigMap of the namespace with its
// number of data keys.
const keyCountOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: key-count
spec:
  controllers:
    - name: annotate
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-limits}]
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {"dcontroller.io/keys": {"@string": {"@len": {"@definedOr": ["$.data", {}]}}}}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`

func gridConfigMap(n int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grid\n  namespace: e2e-limits\n  labels: {grid: \"yes\"}\ndata:\n  size: %q\n", fmt.Sprint(n))
}

// TestFanOutLimitBinary runs the real `dctl start`: an operator whose one
// change would unwind into 10⁶ objects gets a PipelineError naming the stage
// and the count in its status, while the manager and another operator keep
// working; a later change within the bound is applied.
func TestFanOutLimitBinary(t *testing.T) {
	var logs bytes.Buffer
	cmd := exec.Command(dctlBin, "start", "--kubeconfig", kubeconfig, "--health-addr", "0", "--metrics-addr", "0", "--api-server-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	alive := func() string {
		select {
		case err := <-exited:
			t.Fatalf("dctl start exited (%v); logs:\n%.5000s", err, logs.String())
		default:
		}
		return ""
	}
	mustKubectl(t, "", "create", "namespace", "e2e-limits")
	mustKubectl(t, fanOutOperator, "apply", "-f", "-")
	mustKubectl(t, keyCountOperator, "apply", "-f", "-")
	status := func(op string) string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", op, "-o",
			`jsonpath={.status.controllers[0].conditions[0].status} {.status.controllers[0].conditions[0].reason} {.status.controllers[0].conditions[0].message}`)
		return out
	}
	keys := func(name string) string {
		out, _ := kubectl(t, "", "-n", "e2e-limits", "get", "configmap", name, "-o", `jsonpath={.metadata.annotations.dcontroller\.io/keys}`)
		return out
	}
	mustKubectl(t, gridConfigMap(3), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if s := status("fan-out"); !strings.HasPrefix(s, "True Ready") {
			return "fan-out status: " + s
		}
		if k := keys("grid"); k != "1" {
			return "grid keys annotation: " + k
		}
		return alive()
	})

	mustKubectl(t, gridConfigMap(1000), "apply", "-f", "-")
	want := `False PipelineError the last pipeline run failed for some objects: spec.controllers[0].pipeline[2]["@unwind"]: ` +
		`the change would make this stage emit 1000009 entries, over the limit of 100000; the change of ConfigMap e2e-limits/grid is not applied`
	eventually(t, 60*time.Second, func() string {
		if s := status("fan-out"); !strings.HasPrefix(s, want) {
			return fmt.Sprintf("fan-out status:\n got %s\nwant %s...", s, want)
		}
		return alive()
	})
	// The other operator keeps working, in the same process.
	mustKubectl(t, "", "-n", "e2e-limits", "create", "configmap", "two", "--from-literal=a=1", "--from-literal=b=2")
	eventually(t, 30*time.Second, func() string {
		if k := keys("two"); k != "2" {
			return "annotation of ConfigMap two: " + k
		}
		if s := status("key-count"); !strings.HasPrefix(s, "True Ready") {
			return "key-count status: " + s
		}
		return alive()
	})
	// A change within the bound is applied on the state kept (size 3): the
	// update removes 9 cells and adds 4, and the refusal is over.
	mustKubectl(t, gridConfigMap(2), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if s := status("fan-out"); !strings.HasPrefix(s, "True Ready") {
			return "fan-out status: " + s
		}
		return alive()
	})
	out, err := runDctl(t, "status", "fan-out")
	if err != nil || !strings.Contains(out, "grid") {
		t.Errorf("dctl status: %s (%v)", out, err)
	}
}
