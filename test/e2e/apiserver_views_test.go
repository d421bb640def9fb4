package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const viewsOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: deploy-view
spec:
  controllers:
    - name: summarize
      sources:
        - apiGroup: apps
          kind: Deployment
          namespace: e2e-views
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            labels: {app: "$.metadata.name"}
          spec:
            replicas: "$.spec.replicas"
            image: "$.spec.template.spec.containers[0].image"
      target:
        kind: DeploymentSummary
    - name: mark
      sources:
        - kind: DeploymentSummary
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-mark"]}
            namespace: "$.metadata.namespace"
          data:
            image: "$.spec.image"
      target:
        apiGroup: ""
        kind: ConfigMap
`

const dsResource = "deploymentsummaries.deploy-view.view.dcontroller.io"

// watchLines runs `kubectl get --watch` in the background and collects its
// output lines.
type watchLines struct {
	mu     sync.Mutex
	lines  []string
	cmd    *exec.Cmd
	stderr syncBuffer
}

func startWatch(t *testing.T, dir, config string, args ...string) *watchLines {
	t.Helper()
	w := &watchLines{}
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", config}, args...)...)
	w.cmd = cmd
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "HOME="+dir)
	cmd.Stderr = &w.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return w
}

func (w *watchLines) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n") + "\n(stderr: " + w.stderr.String() + ")"
}

// TestAPIServerViews drives the development-mode view API server of
// `dctl start` with kubectl: live discovery, get/list with selectors and
// output formats, a watch seeing a pipeline's change, writes (apply, replace,
// merge/JSON/strategic patch, server-side apply with conflicts, dry run,
// delete, deletecollection) and that a write through the API server drives
// the controller that sources the view. It also resumes a watch from a
// resourceVersion over plain HTTP.
func TestAPIServerViews(t *testing.T) {
	mustKubectl(t, "", "create", "namespace", "e2e-views")
	dir := t.TempDir()
	srv := startDctl(t, dir, "start", "--metrics-addr", "0", "--health-addr", "0")
	cfg := filepath.Join(dir, "dev.config")
	writeFile(t, cfg, mustDctlIn(t, dir, "generate-config", "--http", "--user=dev", "--namespaces=*", "--server-address="+srv.addr))
	k := func(args ...string) (string, error) { return viewKubectl(t, dir, cfg, "", args...) }
	mk := func(stdin string, args ...string) string { return mustViewKubectl(t, dir, cfg, stdin, args...) }

	// Discovery follows the operator: nothing before, the view kind as soon
	// as the operator runs (before any object exists), nothing after.
	if out := mk("", "api-resources", "--api-group=deploy-view.view.dcontroller.io", "--no-headers"); strings.TrimSpace(out) != "" {
		t.Fatalf("view group served before the operator exists: %q", out)
	}
	mustKubectl(t, viewsOperator, "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		out, err := k("api-resources", "--api-group=deploy-view.view.dcontroller.io", "--no-headers")
		if err != nil || !strings.Contains(out, "deploymentsummaries") || !strings.Contains(out, "DeploymentSummary") {
			return fmt.Sprintf("api-resources: %q %v", out, err)
		}
		return ""
	})
	if out := mk("", "get", dsResource, "-n", "e2e-views"); !strings.Contains(out, "No resources found") && strings.TrimSpace(out) != "" {
		t.Errorf("empty list: %q", out)
	}

	// A watch sees what the pipeline writes.
	w := startWatch(t, dir, cfg, "get", dsResource, "-n", "e2e-views", "--watch", "-o", "json", "--output-watch-events")
	time.Sleep(time.Second)
	mustKubectl(t, deploymentYAML("e2e-views", "web", "nginx:1.25", 2, nil), "apply", "-f", "-")
	mustKubectl(t, deploymentYAML("e2e-views", "db", "postgres:16", 1, nil), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		txt := strings.ReplaceAll(w.text(), " ", "")
		if !strings.Contains(txt, `"type":"ADDED"`) || !strings.Contains(txt, `"image":"nginx:1.25"`) || !strings.Contains(txt, `"image":"postgres:16"`) {
			return "watch output:\n" + w.text()
		}
		return ""
	})
	mustKubectl(t, deploymentYAML("e2e-views", "web", "nginx:1.27", 3, map[string]string{}), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		txt := strings.ReplaceAll(w.text(), " ", "")
		if !strings.Contains(txt, `"type":"MODIFIED"`) || !strings.Contains(txt, `"image":"nginx:1.27"`) {
			return "watch output after the update:\n" + w.text()
		}
		return ""
	})

	// Reads: -o yaml/json/wide, label and field selectors, all namespaces.
	if out := mk("", "get", dsResource, "web", "-n", "e2e-views", "-o", "jsonpath={.spec.image} {.spec.replicas} {.metadata.uid}"); !strings.HasPrefix(out, "nginx:1.27 3 ") || len(out) < 20 {
		t.Errorf("get -o jsonpath: %q", out)
	}
	if out := mk("", "get", dsResource, "-n", "e2e-views", "-o", "wide"); !strings.Contains(out, "GENERATION") || !strings.Contains(out, "LABELS") || !strings.Contains(out, "db") {
		t.Errorf("-o wide:\n%s", out)
	}
	if out := mk("", "get", dsResource, "-n", "e2e-views", "-l", "app=db", "-o", "name"); strings.TrimSpace(out) != "deploymentsummary.deploy-view.view.dcontroller.io/db" {
		t.Errorf("label selector: %q", out)
	}
	if out := mk("", "get", dsResource, "-A", "--field-selector", "metadata.name=web", "-o", "name"); strings.TrimSpace(out) != "deploymentsummary.deploy-view.view.dcontroller.io/web" {
		t.Errorf("field selector: %q", out)
	}
	if _, err := k("get", dsResource, "-A", "--field-selector", "spec.image=x"); err == nil || !strings.Contains(err.Error(), "field label not supported") {
		t.Errorf("unsupported field selector: %v", err)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(mk("", "get", dsResource, "-n", "e2e-views", "-o", "json")), &list); err != nil || len(list.Items) != 2 {
		t.Errorf("-o json: %v %+v", err, list)
	}
	if _, err := k("get", dsResource, "nope", "-n", "e2e-views"); err == nil || !strings.Contains(err.Error(), `deploymentsummaries.deploy-view.view.dcontroller.io "nope" not found`) {
		t.Errorf("get missing: %v", err)
	}

	// Writes through the API server drive the controller sourcing the view.
	view := `apiVersion: deploy-view.view.dcontroller.io/v1alpha1
kind: DeploymentSummary
metadata:
  name: manual
  namespace: e2e-views
spec:
  image: busybox:1
  replicas: 1
`
	// kubectl apply finds the OpenAPI it needs (server-side field
	// validation, merge patches): no warning on stderr.
	applyCmd := exec.Command(kubectlBin, "--kubeconfig", cfg, "apply", "-f", "-")
	applyCmd.Dir, applyCmd.Env = dir, append(applyCmd.Environ(), "HOME="+dir)
	applyCmd.Stdin = strings.NewReader(view)
	var applyErr strings.Builder
	applyCmd.Stderr = &applyErr
	if err := runBounded(applyCmd); err != nil || applyErr.Len() != 0 {
		t.Errorf("kubectl apply of a view: %v, stderr %q", err, applyErr.String())
	}
	markImage := func(name string) (string, error) {
		return kubectl(t, "", "-n", "e2e-views", "get", "configmap", name+"-mark", "-o", "jsonpath={.data.image}")
	}
	eventually(t, 20*time.Second, func() string {
		if got, err := markImage("manual"); err != nil || got != "busybox:1" {
			return fmt.Sprintf("manual-mark %q (err %v)", got, err)
		}
		return ""
	})
	applyCmd = exec.Command(kubectlBin, "--kubeconfig", cfg, "apply", "-f", "-")
	applyCmd.Dir, applyCmd.Env = dir, append(applyCmd.Environ(), "HOME="+dir)
	applyCmd.Stdin = strings.NewReader(strings.Replace(view, "busybox:1", "busybox:2", 1))
	applyErr.Reset()
	applyCmd.Stderr = &applyErr
	if err := runBounded(applyCmd); err != nil || applyErr.Len() != 0 {
		t.Errorf("kubectl apply of a changed view: %v, stderr %q", err, applyErr.String())
	}
	mk("", "-n", "e2e-views", "patch", dsResource, "manual", "--type=merge", "-p", `{"spec":{"image":"busybox:3"}}`)
	mk("", "-n", "e2e-views", "patch", dsResource, "manual", "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":5}]`)
	mk("", "-n", "e2e-views", "patch", dsResource, "manual", "-p", `{"spec":{"image":"busybox:4"}}`) // strategic: applied as a merge patch
	if _, err := k("-n", "e2e-views", "patch", dsResource, "manual", "-p", `{"spec":{"$patch":"replace"}}`); err == nil || !strings.Contains(err.Error(), "UnsupportedMediaType") && !strings.Contains(err.Error(), "need a schema") {
		t.Errorf("strategic patch with a directive: %v", err)
	}
	eventually(t, 20*time.Second, func() string {
		if got, err := markImage("manual"); err != nil || got != "busybox:4" {
			return fmt.Sprintf("manual-mark after patches %q (err %v)", got, err)
		}
		return ""
	})
	if out := mk("", "-n", "e2e-views", "get", dsResource, "manual", "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); out != "5 5" {
		t.Errorf("replicas and generation after 4 spec changes: %q", out)
	}
	// Server-side apply: field ownership and conflicts.
	ssa := "apiVersion: deploy-view.view.dcontroller.io/v1alpha1\nkind: DeploymentSummary\nmetadata:\n  name: manual\n  namespace: e2e-views\nspec:\n  image: busybox:5\n"
	if _, err := viewKubectl(t, dir, cfg, ssa, "apply", "--server-side", "--field-manager=alice", "-f", "-"); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Errorf("server-side apply over another manager's field: %v", err)
	}
	mk(ssa, "apply", "--server-side", "--field-manager=alice", "--force-conflicts", "-f", "-")
	if out := mk("", "-n", "e2e-views", "get", dsResource, "manual", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}"); !strings.Contains(out, "alice") {
		t.Errorf("managers: %q", out)
	}
	// replace with a stale resourceVersion conflicts.
	cur := mk("", "-n", "e2e-views", "get", dsResource, "manual", "-o", "yaml")
	mk("", "-n", "e2e-views", "label", dsResource, "manual", "touched=yes")
	if _, err := viewKubectl(t, dir, cfg, cur, "replace", "-f", "-"); err == nil || !strings.Contains(err.Error(), "Conflict") {
		t.Errorf("replace with a stale resourceVersion: %v", err)
	}
	// Dry run changes nothing.
	mk(strings.Replace(view, "name: manual", "name: dry", 1), "create", "--dry-run=server", "-f", "-")
	if _, err := k("-n", "e2e-views", "get", dsResource, "dry"); err == nil {
		t.Error("a server-side dry run created the object")
	}
	// Delete: the downstream ConfigMap goes too.
	mk("", "-n", "e2e-views", "delete", dsResource, "manual")
	eventually(t, 20*time.Second, func() string {
		if _, err := markImage("manual"); err == nil {
			return "manual-mark still exists"
		}
		return ""
	})
	// Deletecollection with a selector.
	for _, n := range []string{"x1", "x2"} {
		mk(strings.Replace(strings.Replace(view, "name: manual", "name: "+n, 1), "spec:", "  labels: {batch: x}\nspec:", 1), "apply", "-f", "-")
	}
	mk("", "-n", "e2e-views", "delete", dsResource, "-l", "batch=x")
	if out := mk("", "-n", "e2e-views", "get", dsResource, "-o", "name"); strings.Contains(out, "x1") || strings.Contains(out, "x2") || !strings.Contains(out, "web") {
		t.Errorf("after deletecollection: %q", out)
	}

	// A watch resumes from a resourceVersion: only later changes arrive.
	base := "http://" + srv.addr + "/apis/deploy-view.view.dcontroller.io/v1alpha1/namespaces/e2e-views/deploymentsummaries"
	c := &http.Client{Timeout: 20 * time.Second}
	_, body, _ := request(t, c, "GET", base, "", "", "")
	var l struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil || l.Metadata.ResourceVersion == "" {
		t.Fatalf("list: %v %s", err, body)
	}
	mk("", "-n", "e2e-views", "label", dsResource, "db", "resumed=yes")
	code, body, _ := request(t, c, "GET", base+"?watch=true&timeoutSeconds=1&resourceVersion="+l.Metadata.ResourceVersion, "", "", "")
	if code != 200 || strings.Count(body, `"type":`) != 1 || !strings.Contains(body, `"type":"MODIFIED"`) || !strings.Contains(body, `"resumed":"yes"`) {
		t.Errorf("resumed watch: %d\n%s", code, body)
	}
	code, _, st := request(t, c, "GET", base+"?watch=true&resourceVersion=999999999", "", "", "")
	if code != 410 || st.Reason != "Expired" {
		t.Errorf("watch from a future resourceVersion: %d %+v", code, st)
	}

	// Deleting the operator drops its views and their discovery.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "deploy-view")
	eventually(t, 20*time.Second, func() string {
		out, err := k("api-resources", "--api-group=deploy-view.view.dcontroller.io", "--no-headers")
		if err != nil || strings.TrimSpace(out) != "" {
			return fmt.Sprintf("api-resources after the operator was deleted: %q %v", out, err)
		}
		return ""
	})
}
