package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestKubeconfigErrorNamesFiles: when no kubeconfig gives a cluster, the
// error names each file looked at and why it gave nothing (client-go's
// asks for KUBERNETES_MASTER); other errors pass through unchanged.
func TestKubeconfigErrorNamesFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.config")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.config")
	load := func(rules *clientcmd.ClientConfigLoadingRules) error {
		_, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		return kubeconfigError(rules, err)
	}

	t.Setenv("KUBECONFIG", empty+string(filepath.ListSeparator)+missing)
	err := load(clientcmd.NewDefaultClientConfigLoadingRules())
	want := "no cluster configuration found in $KUBECONFIG (" + empty + ": no cluster, user or context in it, " + missing + ": no such file): give --kubeconfig or set $KUBECONFIG"
	if err == nil || err.Error() != want {
		t.Errorf("$KUBECONFIG of an empty and a missing file: %v, want %q", err, want)
	}

	// Without $KUBECONFIG, client-go looks at ~/.kube/config (its path is
	// fixed when client-go is initialised: here it is replaced).
	t.Setenv("KUBECONFIG", "")
	err = load(&clientcmd.ClientConfigLoadingRules{Precedence: []string{missing}})
	if err == nil || !strings.Contains(err.Error(), "in ~/.kube/config ("+missing+": no such file)") {
		t.Errorf("no $KUBECONFIG, no ~/.kube/config: %v", err)
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = empty
	if err := load(rules); err == nil || !strings.Contains(err.Error(), "--kubeconfig "+empty+": no cluster, user or context in it") {
		t.Errorf("--kubeconfig of an empty file: %v", err)
	}

	other := errors.New("some other error")
	if got := kubeconfigError(rules, other); got != other {
		t.Errorf("another error: %v, want it unchanged", got)
	}
}
