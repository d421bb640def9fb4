package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDctlStartBinary runs the real `dctl start` process: health and
// readiness endpoints answer, metrics are served, an operator runs, and
// SIGTERM stops it cleanly.
func TestDctlStartBinary(t *testing.T) {
	health, metrics := freeAddr(t), freeAddr(t)
	var logs bytes.Buffer
	cmd := exec.Command(dctlBin, "start", "--kubeconfig", kubeconfig, "--health-addr", health, "--metrics-addr", metrics, "--api-server-addr", "127.0.0.1:0", "-v", "1")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		eventually(t, 20*time.Second, func() string {
			if code, body := get("http://" + health + path); code != 200 {
				return fmt.Sprintf("%s: %d %s", path, code, body)
			}
			return ""
		})
	}
	mustKubectl(t, "", "create", "namespace", "e2e-binary")
	op, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(string(op), "namespace: default", "namespace: e2e-binary", 1)
	spec = strings.Replace(spec, "name: pod-container-num-annotator\nspec", "name: binary-annotator\nspec", 1)
	mustKubectl(t, spec, "apply", "-f", "-")
	mustKubectl(t, podYAML("p", "e2e-binary", 2), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if got, err := annotation(t, "e2e-binary", "p"); err != nil || got != "2" {
			return fmt.Sprintf("annotation %q (err %v)\nlogs:\n%s", got, err, logs.String())
		}
		return ""
	})
	if code, body := get("http://" + metrics + "/metrics"); code != 200 || !strings.Contains(body, `dcontroller_deltas_in_total{controller="pod-container-num-annotator",operator="binary-annotator"}`) {
		t.Errorf("metrics: %d\n%.2000s", code, body)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "binary-annotator")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("dctl start exited with %v; logs:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("dctl start did not stop on SIGTERM; logs:\n%s", logs.String())
	}
}

// TestDctlStartBadKubeconfig: a missing kubeconfig is a clear error with exit status 1.
func TestDctlStartBadKubeconfig(t *testing.T) {
	cmd := exec.Command(dctlBin, "start", "--kubeconfig", "/nonexistent/kubeconfig")
	out, err := combinedOutputBounded(cmd)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Error: loading kubeconfig") || strings.Contains(string(out), "goroutine ") {
		t.Errorf("output:\n%s", out)
	}
}
