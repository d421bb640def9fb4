package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestShardingMissingNamespace: dctl start --sharding with a ring
// namespace that does not exist exits at once (code 1) with a message
// naming the namespace, instead of failing later with a lost member Lease.
func TestShardingMissingNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, dctlBin, "start", "--kubeconfig", kubeconfig, "--health-addr", "0", "--metrics-addr", "0",
		"--api-server-addr", "127.0.0.1:0", "--sharding", "--sharding-namespace", "no-such-ring-namespace", "--sharding-identity", "m1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("dctl start: %v (want exit 1); output:\n%s", err, out)
	}
	if want := `the ring's namespace "no-such-ring-namespace" (--sharding-namespace, default --leader-election-namespace) does not exist: create it first`; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	t.Logf("exited after %s", time.Since(start).Round(time.Millisecond))
}
