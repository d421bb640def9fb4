package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMetacontrollerResync: resyncPeriodSeconds calls the hook for every
// parent periodically and resyncAfterSeconds once more after the delay,
// even though nothing changes; the controllers report Ready in their
// status, and an invalid one says why it does not run, with the spec path.
func TestMetacontrollerResync(t *testing.T) {
	const ns = "e2e-mc-resync"
	installCRD(t, "Ticker", "tickers", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	var mu sync.Mutex
	calls := map[string]int{}
	h := newHookServer(t, func(req map[string]any) any {
		name := str(path(req, "parent.metadata.name"))
		mu.Lock()
		calls[name]++
		mu.Unlock()
		if name == "after" {
			return map[string]any{"resyncAfterSeconds": 0.3}
		}
		return map[string]any{}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: ticker-period}
spec:
  generateSelector: true
  resyncPeriodSeconds: 1
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: tickers
    labelSelector: {matchLabels: {mode: period}}
  hooks:
    sync: {webhook: {url: %[1]s}}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: ticker-after}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: tickers
    labelSelector: {matchLabels: {mode: after}}
  hooks:
    sync: {webhook: {url: %[1]s}}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: ticker-broken}
spec:
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: nosuchthings}
  hooks:
    sync: {webhook: {url: %[1]s}}
`, h.URL))
	for _, mode := range []string{"period", "after", "none"} {
		mustKubectl(t, fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: Ticker\nmetadata: {name: %s, namespace: %s, labels: {mode: %s}}\n", mode, ns, mode), "apply", "-f", "-")
	}
	eventually(t, 20*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		if calls["period"] == 0 || calls["after"] == 0 {
			return fmt.Sprintf("calls %v", calls)
		}
		return ""
	})
	mu.Lock()
	p0, a0 := calls["period"], calls["after"]
	mu.Unlock()
	time.Sleep(3 * time.Second)
	mu.Lock()
	p1, a1, none := calls["period"], calls["after"], calls["none"]
	mu.Unlock()
	if p1-p0 < 2 || p1-p0 > 5 {
		t.Errorf("resyncPeriodSeconds=1: %d calls in 3s", p1-p0)
	}
	if a1-a0 < 4 {
		t.Errorf("resyncAfterSeconds=0.3: %d calls in 3s", a1-a0)
	}
	if none != 0 {
		t.Errorf("a parent outside both label selectors was synced %d times", none)
	}

	status := mustKubectl(t, "", "get", "compositecontroller", "ticker-period", "ticker-broken", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}:{.status.conditions[?(@.type=="Ready")].message}{"\n"}{end}`)
	if !strings.Contains(status, "ticker-period=True:") || !strings.Contains(status, `ticker-broken=False:spec.parentResource: resource "nosuchthings"`) {
		t.Errorf("controller status:\n%s", status)
	}
}
