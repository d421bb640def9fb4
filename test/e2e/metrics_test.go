package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
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

// scrape reads the manager's metrics endpoint: the value of each series,
// by its name and labels as exposed ("name{a="x",b="y"}").
func scrape(addr string) (map[string]string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out, nil
}

// TestMetricsFromStart checks that an operator's controllers and a
// DecoratorController have their series at 0, with their ready gauges, as
// soon as they start and before any change reaches them (a quiet manager
// is on the dashboard), that a controller that cannot start is not ready,
// and that the series go with a controller removed by a new generation,
// with a deleted operator and with a deleted controller object.
func TestMetricsFromStart(t *testing.T) {
	const ns = "e2e-quiet"
	addr := freeAddr(t)
	startManagerWith(t, operator.ManagerOptions{MetricsAddr: addr})
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "quiet", "--ignore-not-found") })
	// copy: Secrets of an empty namespace into a view; label: the view
	// onto ConfigMaps (a Patcher); missing: a source kind no API serves.
	const op = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: quiet
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: Secret, namespace: e2e-quiet}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
      target: {kind: SecretCopy}
    - name: label
      sources: [{kind: SecretCopy}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {copied: "yes"}}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`
	const missing = `    - name: missing
      sources: [{apiGroup: e2e-quiet.example.com, version: v1, kind: Nothing}]
      pipeline:
        "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}
      target: {kind: NothingCopy}
`
	mustKubectl(t, op+missing, "apply", "-f", "-")
	hooks := newHookServer(t, func(map[string]any) any { return map[string]any{} })
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: quiet
spec:
  resources:
    - apiVersion: v1
      resource: configmaps
      labelSelector: {matchLabels: {e2e-quiet: "yes"}}
  hooks:
    sync: {webhook: {url: %[1]s/sync}}
    customize: {webhook: {url: %[1]s/customize}}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: quiet-missing
spec:
  parentResource: {apiVersion: e2e-quiet.example.com/v1, resource: nothings}
  hooks:
    sync: {webhook: {url: %[1]s/sync}}
`, hooks.URL))

	const dc = `controller="decoratorcontroller/quiet"`
	want := map[string]string{
		`dcontroller_controller_ready{controller="copy",operator="quiet"}`:                                        "1",
		`dcontroller_controller_ready{controller="label",operator="quiet"}`:                                       "1",
		`dcontroller_controller_ready{controller="missing",operator="quiet"}`:                                     "0",
		`dcontroller_deltas_in_total{controller="copy",operator="quiet"}`:                                         "0",
		`dcontroller_deltas_out_total{controller="copy",operator="quiet"}`:                                        "0",
		`dcontroller_pipeline_duration_seconds_count{controller="copy",operator="quiet"}`:                         "0",
		`dcontroller_target_writes_total{controller="copy",operation="create",operator="quiet",result="success"}`: "0",
		`dcontroller_target_writes_total{controller="copy",operation="delete",operator="quiet",result="error"}`:   "0",
		`dcontroller_target_writes_total{controller="label",operation="patch",operator="quiet",result="success"}`: "0",
		`dcontroller_target_writes_skipped_total{controller="label",operator="quiet"}`:                            "0",
		`dcontroller_errors_total{controller="copy",kind="pipeline",operator="quiet"}`:                            "0",
		`dcontroller_errors_total{controller="label",kind="write",operator="quiet"}`:                              "0",
		`dcontroller_metacontroller_ready{` + dc + `}`:                                                            "1",
		`dcontroller_metacontroller_ready{controller="compositecontroller/quiet-missing"}`:                        "0",
		`dcontroller_metacontroller_syncs_total{` + dc + `,result="synced"}`:                                      "0",
		`dcontroller_metacontroller_syncs_total{` + dc + `,result="failed"}`:                                      "0",
		`dcontroller_metacontroller_writes_total{` + dc + `,verb="patch"}`:                                        "0",
		`dcontroller_metacontroller_hook_calls_total{` + dc + `,hook="sync"}`:                                     "0",
		`dcontroller_metacontroller_hook_calls_total{` + dc + `,hook="customize"}`:                                "0",
		`dcontroller_metacontroller_hook_errors_total{` + dc + `,hook="sync",reason="Timeout"}`:                   "0",
		`dcontroller_metacontroller_hook_duration_seconds_count{` + dc + `,hook="sync",type="webhook"}`:           "0",
	}
	eventually(t, 30*time.Second, func() string {
		got, err := scrape(addr)
		if err != nil {
			return err.Error()
		}
		var bad []string
		for s, v := range want {
			if got[s] != v {
				bad = append(bad, fmt.Sprintf("%s = %q, want %s", s, got[s], v))
			}
		}
		sort.Strings(bad)
		return strings.Join(bad, "; ")
	})
	if n := hooks.calls.Load(); n != 0 {
		t.Errorf("the hooks were called %d times: the test wants a quiet controller", n)
	}

	// A new generation without the controller that cannot start: its
	// series go, the others stay.
	mustKubectl(t, op, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		got, err := scrape(addr)
		if err != nil {
			return err.Error()
		}
		for s := range got {
			if strings.Contains(s, `controller="missing"`) {
				return "series of the removed controller: " + s
			}
		}
		if v := got[`dcontroller_controller_ready{controller="copy",operator="quiet"}`]; v != "1" {
			return fmt.Sprintf("copy's ready gauge is %q after the new generation", v)
		}
		return ""
	})

	// Deleted: every series goes.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "quiet")
	mustKubectl(t, "", "delete", "decoratorcontrollers.metacontroller.k8s.io", "quiet")
	mustKubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "quiet-missing")
	eventually(t, 30*time.Second, func() string {
		got, err := scrape(addr)
		if err != nil {
			return err.Error()
		}
		var left []string
		for s := range got {
			if strings.Contains(s, `operator="quiet"`) || strings.Contains(s, `/quiet"`) || strings.Contains(s, `/quiet-missing"`) {
				left = append(left, s)
			}
		}
		sort.Strings(left)
		if len(left) > 0 {
			return fmt.Sprintf("%d series left, e.g. %s", len(left), left[0])
		}
		return ""
	})
}
