package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMetrics scrapes a running manager's Prometheus endpoint and checks the
// dcontroller_* series of an operator that did some work.
func TestMetrics(t *testing.T) {
	addr := freeAddr(t)
	startManagerWith(t, operator.ManagerOptions{MetricsAddr: addr})
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "metered", "--ignore-not-found") })
	mustKubectl(t, "", "create", "namespace", "e2e-metrics")
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: metered
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-metrics}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {data: "$.data"}
      target: {kind: ConfigCopy}
    - name: label
      sources: [{kind: ConfigCopy}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {copied: "yes"}}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`, "apply", "-f", "-")
	for i := 0; i < 3; i++ {
		mustKubectl(t, "", "-n", "e2e-metrics", "create", "configmap", fmt.Sprintf("cm-%d", i), "--from-literal=k=v")
	}
	eventually(t, 20*time.Second, func() string {
		out, err := kubectl(t, "", "-n", "e2e-metrics", "get", "configmaps", "-l", "copied=yes", "-o", "name")
		if err != nil || strings.Count(out, "configmap/") != 3 {
			return fmt.Sprintf("labelled configmaps: %q %v", out, err)
		}
		return ""
	})
	want := []string{
		`dcontroller_deltas_in_total{controller="copy",operator="metered"}`,
		`dcontroller_deltas_out_total{controller="copy",operator="metered"}`,
		`dcontroller_pipeline_duration_seconds_bucket{controller="copy",operator="metered",le=`,
		`dcontroller_target_writes_total{controller="label",operation="patch",operator="metered",result="success"} `,
		`dcontroller_view_objects{kind="ConfigCopy",operator="metered"} 3`,
	}
	eventually(t, 20*time.Second, func() string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				return fmt.Sprintf("metrics lack %s", w)
			}
		}
		// At least one patch per ConfigMap (a conflict may add a retry).
		m := regexp.MustCompile(`dcontroller_target_writes_total\{controller="label",operation="patch",operator="metered",result="success"\} (\d+)`).FindStringSubmatch(string(b))
		if m == nil {
			return "no successful patch counted"
		}
		if n, _ := strconv.Atoi(m[1]); n < 3 {
			return fmt.Sprintf("%d successful patches, want at least 3", n)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "metered")
}
