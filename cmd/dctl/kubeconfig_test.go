package main

import (
	"bytes"
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

// TestStartUnreachableAPIServer: dctl start against an API server that
// does not answer (a closed port) exits 1 saying it could not look the
// kinds up at that server, not that the CRDs are not installed.
func TestStartUnreachableAPIServer(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
  name: c
contexts:
- context: {cluster: c, user: u}
  name: c
current-context: c
users:
- name: u
  user: {token: x}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"start", "--kubeconfig", kc, "--release-startup-pages-after=0", "--health-addr=127.0.0.1:0", "--metrics-addr=0"}
	code := Execute(args, nil, &stdout, &stderr)
	s := stderr.String()
	if code != 1 || !strings.Contains(s, "looking up the Operator and hook controller kinds at the Kubernetes API server https://127.0.0.1:1") ||
		!strings.Contains(s, "connection refused") || strings.Contains(s, "installed") {
		t.Errorf("dctl %q: exit %d, stderr %q; want 1 and the server's failure, not CRDs missing", args, code, s)
	}
}
