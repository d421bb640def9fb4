package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestMetacontrollerSyncErrorEvent: a hook that answers 403 gives its
// parent a Warning Event with Metacontroller's reason SyncError, which is
// what `kubectl get events --field-selector reason=SyncError` waits for;
// the finer reason stays in the Synced condition.
func TestMetacontrollerSyncErrorEvent(t *testing.T) {
	const ns = "e2e-mc-syncerror"
	installCRD(t, "Forbidden", "forbiddens", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)

	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "not allowed", http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: forbidden-decorator}
spec:
  resources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: forbiddens
  hooks:
    sync:
      webhook: {url: %s}
`, srv.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Forbidden
metadata: {name: x, namespace: `+ns+`}
spec: {v: "1"}
`, "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=x,reason=SyncError",
			"-o", "jsonpath={range .items[*]}{.type} {.message}{\"\\n\"}{end}")
		if !strings.HasPrefix(ev, "Warning ") || !strings.Contains(ev, "HTTPStatus") || !strings.Contains(ev, "403") {
			return fmt.Sprintf("no SyncError Warning event naming the 403 (calls %d): %q", calls.Load(), ev)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Forbidden", ns, "x")
		if err != nil {
			return err.Error()
		}
		conds, _ := path(p.Object, "status.conditions").([]any)
		for _, c := range conds {
			if cm := c.(map[string]any); cm["type"] == "Synced" && cm["status"] == "False" && cm["reason"] == "SyncHookFailed" {
				return ""
			}
		}
		return fmt.Sprintf("conditions %v, want Synced=False SyncHookFailed", conds)
	})
	if other := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=x,reason=SyncHookFailed", "-o", "name"); other != "" {
		t.Errorf("an Event with the condition's reason: %s", other)
	}
}
