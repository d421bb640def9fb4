package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`

// TestRestConfigRateLimits: by default the manager's client has no
// client-side rate limit (QPS -1, as controller-runtime's GetConfig gives),
// not client-go's 5 and 10; --kube-api-qps and --kube-api-burst set one.
func TestRestConfigRateLimits(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, -1, 0},
		{[]string{"--kube-api-qps", "0"}, 0, 0},
		{[]string{"--kube-api-qps", "7.5", "--kube-api-burst", "9"}, 7.5, 9},
	} {
		f := &managerFlags{}
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd, "0", "0")
		if err := cmd.Flags().Parse(append([]string{"--kubeconfig", kc}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst || cfg.Host != "https://127.0.0.1:6443" {
			t.Errorf("%v: host %s qps %v burst %d, want %v %d", tc.args, cfg.Host, cfg.QPS, cfg.Burst, tc.qps, tc.burst)
		}
	}
}
