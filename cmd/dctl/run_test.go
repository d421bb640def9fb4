package main

import (
	"io"
	"strings"
	"testing"
)

// TestStandaloneRefusesClusterFlags: a flag that only says how to reach a
// Kubernetes API server is an error with --standalone, named, before any
// file is read; without --standalone it is not refused.
func TestStandaloneRefusesClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--standalone", "--kube-api-qps=5", "-f", "missing.yaml"}, "--kube-api-qps: no effect with --standalone"},
		{[]string{"--standalone", "--kubeconfig=x", "--kube-api-burst=3", "-f", "missing.yaml"}, "--kubeconfig, --kube-api-burst: no effect with --standalone, which runs without a Kubernetes API server; drop them"},
		{[]string{"--standalone", "--leader-elect", "-f", "missing.yaml"}, "--leader-elect: no effect"},
		{[]string{"--standalone", "--health-addr=:8081", "--kube-api-qps=-1", "-f", "missing.yaml"}, "--kube-api-qps, --health-addr: no effect"}, // a default value too
		{[]string{"--standalone", "--release-startup-pages-after=0", "-f", "missing.yaml"}, "--release-startup-pages-after: no effect"},
		{[]string{"--kube-api-qps=5", "-f", "missing.yaml"}, "missing.yaml"}, // reaches the file
	} {
		cmd := newRunCommand()
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dctl run %q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
