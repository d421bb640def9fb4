package e2e

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/pkg/watchcodec"
)

// podWatches reads the API server's count of open Pod watches.
func podWatches(t *testing.T) int {
	t.Helper()
	out := mustKubectl(t, "", "get", "--raw", "/metrics")
	n := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `resource="pods"`) && strings.Contains(line, `verb="WATCH"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}

// TestSharedInformers: ten operators watching Pods open one Pod watch.
func TestSharedInformers(t *testing.T) {
	// The API server keeps a Pod watch of its own; wait until the count is
	// steady (watches of earlier tests' managers closed) and use it as baseline.
	baseline := podWatches(t)
	eventually(t, 30*time.Second, func() string {
		time.Sleep(time.Second)
		n := podWatches(t)
		if n != baseline {
			baseline = n
			return fmt.Sprintf("pod watch count still changing (%d)", n)
		}
		return ""
	})
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-shared")
	for i := 0; i < 10; i++ {
		mustKubectl(t, fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: shared-%d
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod, namespace: e2e-shared}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {op: %d}
      target: {kind: PodCopy}
`, i, i), "apply", "-f", "-")
	}
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "-o", `jsonpath={range .items[*]}{.status.controllers[0].conditions[0].status}{end}`)
		if err != nil || strings.Count(out, "True") < 10 {
			return fmt.Sprintf("operators not ready: %q %v", out, err)
		}
		return ""
	})
	if n := podWatches(t) - baseline; n != 1 {
		t.Errorf("%d pod watches for ten operators, want 1", n)
	}
	for i := 0; i < 10; i++ {
		mustKubectl(t, "", "delete", "operators.dcontroller.io", fmt.Sprintf("shared-%d", i))
	}
}

// TestInformersDecodeOnce: the manager's informers decode watched objects
// with the one-parse decoder (pkg/watchcodec), not client-go's, and the
// operator sees them as before.
func TestInformersDecodeOnce(t *testing.T) {
	once0, handed0 := watchcodec.Counts()
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-decode")
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: decode-once
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-decode}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: e2e-decode-out}
          data: {copy: "$.data.v"}
      target: {apiGroup: "", kind: ConfigMap}
`, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "decode-once") })
	mustKubectl(t, "", "create", "namespace", "e2e-decode-out")
	for i := 0; i < 5; i++ {
		mustKubectl(t, "", "-n", "e2e-decode", "create", "configmap", fmt.Sprint("cm-", i), fmt.Sprintf("--from-literal=v=x%d", i))
	}
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "-n", "e2e-decode-out", "get", "configmap", "cm-4", "-o", "jsonpath={.data.copy}")
		if err != nil || out != "x4" {
			return fmt.Sprintf("target cm-4: %q %v", out, err)
		}
		return ""
	})
	once1, handed1 := watchcodec.Counts()
	if once1-once0 < 5 {
		t.Fatalf("the one-parse decoder decoded %d objects, want at least the 5 ConfigMaps", once1-once0)
	}
	if handed1 != handed0 {
		t.Fatalf("%d objects went to client-go's decoder, want none", handed1-handed0)
	}
}

// TestSourceKindNamedStatus: a custom resource whose kind is named like a
// meta.k8s.io kind (Status) is watched as any other. client-go's dynamic
// client decodes its events into typed meta Status objects, which the
// informer rejects: the source never synced and the operator never started.
func TestSourceKindNamedStatus(t *testing.T) {
	installCRD(t, "Status", "statuses", "Namespaced")
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-status-kind")
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: status-kind
spec:
  controllers:
    - name: c
      sources: [{apiGroup: e2e.dcontroller.io, kind: Status, namespace: e2e-status-kind}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          data: {answer: {"@string": "$.spec.answer"}}
      target: {apiGroup: "", kind: ConfigMap}
`, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "status-kind") })
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Status
metadata: {name: s1, namespace: e2e-status-kind}
spec: {answer: 42}
`, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "-n", "e2e-status-kind", "get", "configmap", "s1", "-o", "jsonpath={.data.answer}")
		if err != nil || out != "42" {
			return fmt.Sprintf("target s1: %q %v", out, err)
		}
		return ""
	})
}
