// Package testcontrolplane runs a package's tests against a real
// kube-apiserver and etcd: the ones `make kube-binaries` builds into the
// repository's bin/k8s, started once per test binary by envtest.
package testcontrolplane

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Run starts the control plane, stores its client configuration in *cfg,
// runs the tests and stops the control plane, also when the test binary is
// interrupted (OnInterrupt); it returns the exit code for os.Exit. name
// prefixes its error messages (a missing binary names the make target that
// builds it). The repository root is found from the working directory (a
// package directory) as the nearest directory with a go.mod.
func Run(m *testing.M, name string, cfg **rest.Config) int {
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	binDir := filepath.Join(root, "bin", "k8s")
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s is missing; run 'make kube-binaries' (make test does it)\n", name, filepath.Join(binDir, b))
			return 1
		}
	}
	var teardown Teardown
	defer teardown.Run()
	defer OnInterrupt(name, &teardown)()
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	teardown.Add(func() { _ = env.Stop() })
	c, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: starting the control plane: %v\n", name, err)
		return 1
	}
	*cfg = c
	return m.Run()
}

// repoRoot is the nearest directory at or above the working directory
// that holds a go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory")
		}
		dir = parent
	}
}
