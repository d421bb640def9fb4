package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/pkg/auth"
)

const summaryResource = "appsummaries.app-summary.view.dcontroller.io"

// TestAPIServerDocsExamples runs the examples of docs/apiserver.md against
// `dctl start` on the test cluster: the example operator, development mode
// with kubectl (discovery, get, explain, apply of a view driving the
// downstream controller, patch), then production mode with the seed
// README's users: a viewer, alice (one namespace, named objects), a team
// over two namespaces, an admin, and a token signed by another key. Every
// command commented "# denied" must be refused with 403 and every one
// commented "# unauthorized" with 401.
func TestAPIServerDocsExamples(t *testing.T) {
	blocks := docBlocks(t)
	for _, name := range []string{"setup", "development", "keys", "production"} {
		if _, ok := blocks[name]; !ok {
			t.Fatalf("docs/apiserver.md has no e2e block %q", name)
		}
	}
	runDocBlock(t, blocks["setup"], t.TempDir(), []string{"KUBECONFIG=" + kubeconfig}, strings.NewReplacer())
	defer mustKubectl(t, "", "delete", "operators.dcontroller.io", "app-summary")

	t.Run("development", func(t *testing.T) {
		dir := t.TempDir()
		srv := startDctl(t, dir, "start", "--metrics-addr", "0", "--health-addr", "0")
		cfg := filepath.Join(dir, "wait.config")
		writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
		waitForSummaries(t, dir, cfg, 9)

		out := runDocBlock(t, blocks["development"], dir, nil, strings.NewReplacer("127.0.0.1:8443", srv.addr))
		for _, want := range []string{
			"appsummaries", "app-summary.view.dcontroller.io/v1alpha1", "AppSummary", // api-resources
			"web-app", "entries: 1", // get -o yaml
			"GENERATION", "RESOURCE-VERSION", // -o wide
			"is a view of operator \"app-summary\"", // explain
			"appsummary.app-summary.view.dcontroller.io/extra created",
			"appsummary.app-summary.view.dcontroller.io/extra patched",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("development example output lacks %q:\n%s", want, out)
			}
		}
		// The view written through the API server drove the "report"
		// controller, which wrote a ConfigMap into the cluster.
		eventually(t, 20*time.Second, func() string {
			got, err := kubectl(t, "", "-n", "team-a", "get", "configmap", "extra-report", "-o", "jsonpath={.data.entries}")
			if err != nil || got != "43" {
				return fmt.Sprintf("extra-report entries %q (err %v)", got, err)
			}
			return ""
		})
		mustViewKubectl(t, dir, cfg, "", "-n", "team-a", "delete", summaryResource, "extra")
		eventually(t, 20*time.Second, func() string {
			if _, err := kubectl(t, "", "-n", "team-a", "get", "configmap", "extra-report"); err == nil {
				return "extra-report still exists after its view was deleted"
			}
			return ""
		})
	})

	t.Run("production", func(t *testing.T) {
		dir := t.TempDir()
		runDocBlock(t, blocks["keys"], dir, nil, strings.NewReplacer())
		srv := startDctl(t, dir, "start", "--metrics-addr", "0", "--health-addr", "0",
			"--api-server-mode=production", "--tls-cert-file=apiserver.crt", "--tls-key-file=apiserver.key")
		c := httpsClient(t, filepath.Join(dir, "apiserver.crt"))
		admin := token(t, filepath.Join(dir, "apiserver.key"), "waiter", []string{"*"}, auth.FullAccess, time.Now(), time.Now().Add(time.Hour))
		eventually(t, 30*time.Second, func() string {
			code, body, _ := request(t, c, "GET", "https://"+srv.addr+"/apis/app-summary.view.dcontroller.io/v1alpha1/appsummaries", admin, "", "")
			if code != 200 || strings.Count(body, `"kind":"AppSummary"`) < 9 {
				return fmt.Sprintf("%d %.300s", code, body)
			}
			return ""
		})
		out := runDocBlock(t, blocks["production"], dir, nil, strings.NewReplacer("127.0.0.1:8443", srv.addr))
		for _, want := range []string{
			"User:        alice", "Namespaces:  team-a", "resourceNames=[web-app,api-service]",
			"Signature:   valid (RS256, verified with apiserver.crt)",
			"appsummary.app-summary.view.dcontroller.io/web-app replaced",
			"appsummary.app-summary.view.dcontroller.io/api-service labeled",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("production example output lacks %q:\n%s", want, out)
			}
		}
		// Eight denials and one 401 are checked by the script; count them so
		// that a doc edit cannot silently drop the checks.
		if n := strings.Count(out, "Forbidden as expected"); n != 8 {
			t.Errorf("%d denials checked, want 8:\n%s", n, out)
		}
		if n := strings.Count(out, "Unauthorized as expected"); n != 1 {
			t.Errorf("%d 401s checked, want 1:\n%s", n, out)
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitForSummaries waits until the view server lists at least n AppSummary
// views.
func waitForSummaries(t *testing.T, dir, config string, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		out, err := viewKubectl(t, dir, config, "", "get", summaryResource, "-A", "--no-headers")
		if err != nil || strings.Count(out, "\n") < n {
			return fmt.Sprintf("views:\n%s(err %v)", out, err)
		}
		return ""
	})
}
