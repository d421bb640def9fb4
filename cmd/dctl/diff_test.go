package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffExitStatus: dctl diff's errors exit with status 2, as kubectl
// diff's, and say what is wrong: no -f, an unknown flag, a file that
// cannot be read or decoded (named), a cluster that cannot be reached
// (named). None of these needs a cluster; the e2e tests cover 0 and 1.
func TestDiffExitStatus(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("..", "..", "examples", "pod-container-num-annotator", "operator.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {name: x}\nspec: {controllers: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unreachable := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"diff", "--kubeconfig", unreachable}, `required flag "filename"`},
		{"unknown flag", []string{"diff", "--frobnicate"}, "unknown flag: --frobnicate"},
		{"missing file", []string{"diff", "--kubeconfig", unreachable, "-f", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{"bad file", []string{"diff", "--kubeconfig", unreachable, "-f", bad}, bad + ": "},
		{"unknown context", []string{"diff", "--kubeconfig", unreachable, "--context", "nope", "-f", good}, `context "nope"`},
		{"unreachable", []string{"diff", "--kubeconfig", unreachable, "-f", good}, "cannot reach the cluster at https://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute(tc.args, strings.NewReader(""), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errb.String(), tc.want)
			}
			if out.Len() > 0 {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}
