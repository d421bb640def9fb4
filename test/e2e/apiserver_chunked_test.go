package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAPIServerChunkedList: kubectl's `get --chunk-size=2` of a view kind
// with 7 objects in two namespaces asks the view API server for pages of 2
// and follows continue (4 requests across namespaces, 2 in one namespace of
// 3), and prints every object once.
func TestAPIServerChunkedList(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "cm.yaml"), `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: cm-keys
spec:
  controllers:
    - name: count
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {keys: {"@len": {"@definedOr": ["$.data", {}]}}}
      target: {kind: KeyCount}
`)
	srv := startDctlEnv(t, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "no-such-kubeconfig")}, "run", "--standalone", "-f", "cm.yaml")
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--insecure", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	eventually(t, 20*time.Second, func() string {
		out, err := viewKubectl(t, dir, cfg, "", "api-resources", "--no-headers")
		if err != nil || !strings.Contains(out, "configmaps") || !strings.Contains(out, "keycounts") {
			return fmt.Sprintf("api-resources: %q %v", out, err)
		}
		return ""
	})
	for i := 0; i < 7; i++ {
		ns := []string{"default", "other"}[i%2]
		name := fmt.Sprintf("cm-%d", i)
		mustViewKubectl(t, dir, cfg, "", "-n", ns, "create", "configmap", name, "--from-literal=a=1")
	}
	const kind = "keycounts.cm-keys.view.dcontroller.io"
	eventually(t, 30*time.Second, func() string {
		out, err := viewKubectl(t, dir, cfg, "", "get", kind, "-A", "--no-headers")
		if err != nil || strings.Count(out, "\n") != 7 {
			return fmt.Sprintf("keycounts: %q %v", out, err)
		}
		return ""
	})
	// kubectl -v=6 logs each request's verb, URL and status on stderr.
	get := func(args ...string) (string, []string) {
		t.Helper()
		cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", cfg, "-v=6", "get", kind, "--chunk-size=2"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := runBounded(cmd); err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), regexp.MustCompile(`verb="GET" url="[^"]*/keycounts\?[^"]*limit=2[^"]*" status="200 OK"`).FindAllString(errb.String(), -1)
	}
	out, reqs := get("-A", "--no-headers", "-o", "custom-columns=NS:.metadata.namespace,NAME:.metadata.name")
	var got []string
	for _, f := range strings.Split(strings.TrimSpace(out), "\n") {
		got = append(got, strings.Join(strings.Fields(f), "/"))
	}
	if len(reqs) != 4 || strings.Count(strings.Join(reqs, "\n"), "continue=") != 3 {
		t.Errorf("kubectl -A --chunk-size=2 sent %d pages (want 4, 3 with continue):\n%s", len(reqs), strings.Join(reqs, "\n"))
	}
	wantSorted := []string{"default/cm-0", "default/cm-2", "default/cm-4", "default/cm-6", "other/cm-1", "other/cm-3", "other/cm-5"}
	if fmt.Sprint(got) != fmt.Sprint(wantSorted) {
		t.Errorf("kubectl -A --chunk-size=2 printed %v, want %v", got, wantSorted)
	}
	out, reqs = get("-n", "other", "-o", "name")
	if len(reqs) != 2 || strings.Count(out, "\n") != 3 {
		t.Errorf("kubectl -n other --chunk-size=2: %d pages (want 2), printed:\n%s", len(reqs), out)
	}
}
