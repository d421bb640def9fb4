package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const flakyCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: flaky-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: flakies
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook:
        url: %s
        timeout: 1s
`

func flakyYAML(v string) string {
	return `apiVersion: e2e.dcontroller.io/v1
kind: Flaky
metadata: {name: f, namespace: e2e-mc-failure}
spec: {v: "` + v + `"}
`
}

// hookErrors sums dcontroller_metacontroller_hook_errors_total for a
// controller and reason.
func hookErrors(t *testing.T, controller, reason string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != "dcontroller_metacontroller_hook_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == controller && labels["reason"] == reason {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestMetacontrollerHookFailures: a hook that returns garbage, is too slow
// or drops the connection never causes a child to be deleted; each failure
// is retried with backoff, reported as a Warning Event and a Synced=False
// condition on the parent, and counted in the metrics; when the hook
// recovers, the parent converges and the hook's status replaces the
// condition.
func TestMetacontrollerHookFailures(t *testing.T) {
	const ns = "e2e-mc-failure"
	installCRD(t, "Flaky", "flakies", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	var mode atomic.Value
	mode.Store("ok")
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch mode.Load().(string) {
		case "garbage":
			_, _ = w.Write([]byte("<html>oops</html>"))
			return
		case "slow":
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
			return
		case "down":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		parent, _ := req["parent"].(map[string]any)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": map[string]any{"ok": true},
			"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "f-data"}, "data": map[string]any{"v": path(parent, "spec.v")}}},
		})
	}))
	t.Cleanup(srv.Close)
	applyMC(t, fmt.Sprintf(flakyCC, srv.URL))
	mustKubectl(t, flakyYAML("1"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if v, err := cmData(t, ns, "f-data", "v"); err != nil || v != "1" {
			return fmt.Sprintf("f-data v=%q (%v)", v, err)
		}
		return ""
	})
	cm, _ := getObj(t, "v1", "ConfigMap", ns, "f-data")

	condition := func(reasonPart string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "Flaky", ns, "f")
			if err != nil {
				return err.Error()
			}
			conds, _ := path(p.Object, "status.conditions").([]any)
			for _, c := range conds {
				cm := c.(map[string]any)
				if cm["type"] == "Synced" && cm["status"] == "False" && cm["reason"] == "SyncHookFailed" &&
					strings.Contains(str(cm["message"]), reasonPart) {
					return ""
				}
			}
			return fmt.Sprintf("conditions %v, want Synced=False mentioning %s", conds, reasonPart)
		}
	}
	for _, tc := range []struct{ mode, reason string }{
		{"garbage", "InvalidResponse"}, {"slow", "Timeout"}, {"down", "Unavailable"},
	} {
		before := hookErrors(t, "compositecontroller/flaky-controller", tc.reason)
		mode.Store(tc.mode)
		mustKubectl(t, flakyYAML("2-"+tc.mode), "apply", "-f", "-")
		eventually(t, 30*time.Second, condition(tc.reason))
		if after := hookErrors(t, "compositecontroller/flaky-controller", tc.reason); after <= before {
			t.Errorf("%s: hook errors metric %v -> %v", tc.mode, before, after)
		}
		// Backoff: a handful of retries, not a hot loop.
		c0 := calls.Load()
		time.Sleep(3 * time.Second)
		if n := calls.Load() - c0; n > 8 {
			t.Errorf("%s: %d calls in 3s: no backoff", tc.mode, n)
		}
		// Nothing was deleted or changed.
		now, err := getObj(t, "v1", "ConfigMap", ns, "f-data")
		if err != nil || now.GetUID() != cm.GetUID() || str(path(now.Object, "data.v")) != "1" {
			t.Fatalf("%s: the child changed or went away: %v %v", tc.mode, err, now.Object["data"])
		}
	}
	events := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=f", "-o", "json")
	for _, want := range []string{`"reason": "SyncHookFailed"`, "InvalidResponse", "Timeout", "Unavailable"} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %s:\n%s", want, events)
		}
	}

	mode.Store("ok")
	mustKubectl(t, flakyYAML("3"), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		if v, _ := cmData(t, ns, "f-data", "v"); v != "3" {
			return "f-data v=" + v
		}
		p, _ := getObj(t, "e2e.dcontroller.io/v1", "Flaky", ns, "f")
		if _, has := path(p.Object, "status.conditions").([]any); has || path(p.Object, "status.ok") != true {
			return fmt.Sprintf("status %v", p.Object["status"])
		}
		return ""
	})
}
