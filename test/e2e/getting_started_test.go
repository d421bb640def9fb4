package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func podYAML(name, ns string, containers int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  containers:\n", name, ns)
	for i := 1; i <= containers; i++ {
		fmt.Fprintf(&b, "  - name: c%d\n    image: docker.io/l7mp/net-debug:latest\n", i)
	}
	return b.String()
}

func annotation(t *testing.T, ns, name string) (string, error) {
	return kubectl(t, "", "-n", ns, "get", "pod", name, "-o", `jsonpath={.metadata.annotations.dcontroller\.io/container-num}`)
}

// TestGettingStarted follows the seed README's getting-started scenario.
func TestGettingStarted(t *testing.T) {
	startManager(t)
	op, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, string(op), "apply", "-f", "-")
	mustKubectl(t, "", "create", "namespace", "gs-other")
	mustKubectl(t, podYAML("net-debug", "default", 1), "apply", "-f", "-")
	mustKubectl(t, podYAML("net-debug-2", "default", 3), "apply", "-f", "-")
	mustKubectl(t, podYAML("elsewhere", "gs-other", 2), "apply", "-f", "-")

	for name, want := range map[string]string{"net-debug": "1", "net-debug-2": "3"} {
		eventually(t, 20*time.Second, func() string {
			got, err := annotation(t, "default", name)
			if err != nil || got != want {
				return fmt.Sprintf("pod %s annotation %q (err %v), want %q", name, got, err, want)
			}
			return ""
		})
	}
	eventually(t, 20*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "pod-container-num-annotator",
			"-o", `jsonpath={.status.controllers[0].name} {.status.controllers[0].conditions[?(@.type=="Ready")].status} {.status.controllers[0].conditions[0].reason} {.status.controllers[0].conditions[0].message}`)
		if err != nil || out != "pod-container-num-annotator True Ready Controller is up and running" {
			return fmt.Sprintf("status %q (err %v)", out, err)
		}
		return ""
	})
	// Pods outside the source namespace are left alone.
	if got, err := annotation(t, "gs-other", "elsewhere"); err != nil || got != "" {
		t.Errorf("pod in another namespace annotated: %q (err %v)", got, err)
	}

	// Recreate net-debug-2 with two containers: the annotation follows.
	mustKubectl(t, "", "delete", "pod", "net-debug-2", "--wait=true")
	mustKubectl(t, podYAML("net-debug-2", "default", 2), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		got, err := annotation(t, "default", "net-debug-2")
		if err != nil || got != "2" {
			return fmt.Sprintf("recreated pod annotation %q (err %v), want 2", got, err)
		}
		return ""
	})

	// Deleting the operator stops it; the pods stay and nothing breaks.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "pod-container-num-annotator")
	time.Sleep(time.Second)
	mustKubectl(t, podYAML("late", "default", 4), "apply", "-f", "-")
	time.Sleep(2 * time.Second)
	if got, err := annotation(t, "default", "late"); err != nil || got != "" {
		t.Errorf("a deleted operator still annotates: %q (err %v)", got, err)
	}
	if got, err := annotation(t, "default", "net-debug"); err != nil || got != "1" {
		t.Errorf("existing annotation changed after operator deletion: %q (err %v)", got, err)
	}
	for _, p := range []string{"net-debug", "net-debug-2", "late"} {
		mustKubectl(t, "", "delete", "pod", p, "--wait=false")
	}
}
