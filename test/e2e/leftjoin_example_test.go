package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestExampleServiceHealthSummary runs examples/service-health-summary live:
// through its left join, a Service that selects no Pod counts 0 of 0, and
// the count follows Pods created, made ready and deleted, back to 0 of 0.
func TestExampleServiceHealthSummary(t *testing.T) {
	startManager(t)
	const ns = "e2e-health-summary"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, exampleFile(t, "service-health-summary", "operator.yaml", ns), "apply", "-f", "-")
	mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: %s}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`, ns), "apply", "-f", "-")
	health := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			got, err := kubectl(t, "", "-n", ns, "get", "service", "web", "-o", `jsonpath={.metadata.annotations.example\.io/health}`)
			if err != nil || got != want {
				return fmt.Sprintf("service web: health %q (err %v), want %q", got, err, want)
			}
			return ""
		})
	}
	health("0/0")
	pod := func(name string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {app: web}}
spec:
  containers: [{name: c, image: registry.example/web:1}]
`, name, ns)
	}
	mustKubectl(t, pod("web-1"), "apply", "-f", "-")
	health("0/1")
	mustKubectl(t, pod("web-2"), "apply", "-f", "-")
	setPodReady(t, ns, "web-1", "True")
	health("1/2")
	mustKubectl(t, "", "-n", ns, "delete", "pod", "web-1", "--wait=true", "--grace-period=0", "--force")
	health("0/1")
	mustKubectl(t, "", "-n", ns, "delete", "pod", "web-2", "--wait=true", "--grace-period=0", "--force")
	health("0/0")
}
