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
        responseUnMarshallMode: strict
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
	return metricSum(t, "dcontroller_metacontroller_hook_errors_total", map[string]string{"controller": controller, "reason": reason})
}

// metricSum sums the counters of a metric family of this process whose
// labels include want.
func metricSum(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// retried checks that a failing sync is retried with backoff: the hook is
// called again (within 20s: the backoff doubles from 250ms), and not more
// than 8 times in the 3s after that.
func retried(t *testing.T, calls func() int64, what string) {
	t.Helper()
	c0 := calls()
	eventually(t, 20*time.Second, func() string {
		if calls() == c0 {
			return what + ": no retry"
		}
		return ""
	})
	c1 := calls()
	time.Sleep(3 * time.Second)
	if n := calls() - c1; n > 8 {
		t.Errorf("%s: %d calls in 3s: no backoff", what, n)
	}
}

// TestMetacontrollerHookFailures: a hook that returns garbage, an unknown
// field (strict mode), is too slow or drops the connection never causes a child to be deleted; each failure
// is retried with backoff, reported as a Warning Event and a Synced=False
// condition on the parent, and counted in the metrics; a child the API
// server refuses is kept as it was and reported the same way (reason
// ChildWriteFailed, next to the hook's status); when the hook
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
		case "unknown":
			// Valid JSON with a field the contract does not have: refused
			// in strict mode.
			_, _ = w.Write([]byte(`{"children": [], "childs": []}`))
			return
		case "down":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		parent, _ := req["parent"].(map[string]any)
		if mode.Load().(string) == "rejected" {
			// The hook answers, but the API server refuses the child: a
			// ConfigMap data key must be [-._a-zA-Z0-9]+.
			_ = json.NewEncoder(w).Encode(map[string]any{
				"status": map[string]any{"ok": true},
				"children": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": "f-data"}, "data": map[string]any{"v": path(parent, "spec.v"), "bad key": "x"}}},
			})
			return
		}
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

	condition := func(reason, reasonPart string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "Flaky", ns, "f")
			if err != nil {
				return err.Error()
			}
			conds, _ := path(p.Object, "status.conditions").([]any)
			for _, c := range conds {
				cm := c.(map[string]any)
				if cm["type"] == "Synced" && cm["status"] == "False" && cm["reason"] == reason &&
					strings.Contains(str(cm["message"]), reasonPart) {
					return ""
				}
			}
			return fmt.Sprintf("conditions %v, want Synced=False mentioning %s", conds, reasonPart)
		}
	}
	// The hook answers but the API server refuses the child: the child is
	// kept as it was, the refusal is in the condition (with the hook's
	// status) and an Event, and the write is retried with backoff.
	mode.Store("rejected")
	mustKubectl(t, flakyYAML("2-rejected"), "apply", "-f", "-")
	eventually(t, 30*time.Second, condition("ChildWriteFailed", "bad key"))
	if p, _ := getObj(t, "e2e.dcontroller.io/v1", "Flaky", ns, "f"); path(p.Object, "status.ok") != true {
		t.Errorf("the hook's status is not kept next to the condition: %v", p.Object["status"])
	}
	retried(t, calls.Load, "rejected")
	if now, err := getObj(t, "v1", "ConfigMap", ns, "f-data"); err != nil || now.GetUID() != cm.GetUID() || str(path(now.Object, "data.v")) != "1" {
		t.Fatalf("rejected: the child changed or went away: %v %v", err, now.Object["data"])
	}

	for _, tc := range []struct{ mode, reason string }{
		{"garbage", "InvalidResponse"}, {"unknown", "childs"}, {"slow", "Timeout"}, {"down", "Unavailable"},
	} {
		metric := tc.reason
		if tc.mode == "unknown" {
			metric = "InvalidResponse"
		}
		before := hookErrors(t, "compositecontroller/flaky-controller", metric)
		mode.Store(tc.mode)
		mustKubectl(t, flakyYAML("2-"+tc.mode), "apply", "-f", "-")
		eventually(t, 30*time.Second, condition("SyncHookFailed", tc.reason))
		if after := hookErrors(t, "compositecontroller/flaky-controller", metric); after <= before {
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
	// The Events carry Metacontroller's reason (SyncError, also for the
	// refused update of a child), the detail is in their messages; users
	// wait for them with --field-selector reason=SyncError.
	events := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=f,reason=SyncError", "-o", "json")
	for _, want := range []string{"Sync hook failed", "InvalidResponse", "Timeout", "Unavailable", "ChildWriteFailed", "bad key"} {
		if !strings.Contains(events, want) {
			t.Errorf("SyncError events lack %s:\n%s", want, events)
		}
	}
	if other := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=f,type=Warning,reason!=SyncError", "-o", "name"); other != "" {
		t.Errorf("Warning events with other reasons: %s", other)
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

// TestMetacontrollerDecoratorChildWriteRetry: a DecoratorController whose
// attachment the API server refuses keeps retrying it (the decorated
// object does not change in between) with backoff, reports the refusal
// as a CreateError Event (Metacontroller's reason) on the object, and
// writes the attachment
// once the hook's answer is acceptable.
func TestMetacontrollerDecoratorChildWriteRetry(t *testing.T) {
	const ns = "e2e-mc-decorator-retry"
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	var bad atomic.Bool
	bad.Store(true)
	h := newHookServer(t, func(req map[string]any) any {
		obj, _ := req["object"].(map[string]any)
		data := map[string]any{"from": str(path(obj, "metadata.name"))}
		if bad.Load() {
			data["bad key"] = "x"
		}
		return map[string]any{"attachments": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": str(path(obj, "metadata.name")) + "-copy", "namespace": ns}, "data": data}}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: copy-decorator}
spec:
  resources:
    - apiVersion: v1
      resource: configmaps
      labelSelector: {matchLabels: {copy: "yes"}}
  attachments:
    - apiVersion: v1
      resource: configmaps
  hooks:
    sync:
      webhook: {url: %s}
`, h.URL))
	mustKubectl(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: src, namespace: `+ns+`, labels: {copy: "yes"}}
data: {a: "1"}
`, "apply", "-f", "-")
	events := func() string {
		return mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=src", "-o", "json")
	}
	eventually(t, 30*time.Second, func() string {
		if e := events(); !strings.Contains(e, `"reason": "CreateError"`) || !strings.Contains(e, "ChildWriteFailed") || !strings.Contains(e, "bad key") {
			return "no CreateError event on src yet"
		}
		return ""
	})
	retried(t, h.calls.Load, "refused attachment")
	bad.Store(false)
	eventually(t, 60*time.Second, func() string {
		if v, err := cmData(t, ns, "src-copy", "from"); err != nil || v != "src" {
			return fmt.Sprintf("src-copy from=%q (%v)", v, err)
		}
		return ""
	})
	stable(t, h, 2*time.Second)
}
