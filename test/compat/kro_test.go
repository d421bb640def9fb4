package compat

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"
)

// kroModule and kroVersion name the kro release whose examples/kubernetes
// are run: the Go module holds the whole repository, examples included.
const (
	kroModule  = "github.com/kubernetes-sigs/kro"
	kroVersion = "v0.9.4"
)

// kroCheckout downloads kro's module into the Go module cache (once; later
// runs find it there) and returns its directory.
func kroCheckout(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", kroModule+"@"+kroVersion)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", kroModule, kroVersion, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	if m.Error != "" || m.Dir == "" {
		t.Fatalf("go mod download %s@%s: %s", kroModule, kroVersion, m.Error)
	}
	return m.Dir
}

// TestKroExamples applies kro's examples/kubernetes RGDs and instances,
// unchanged, to a local control plane running `dctl start`, and checks the
// resources and status kro's READMEs state (hack/kro-examples.sh; the steps
// are kro/<example>/steps). Every case must report ok.
func TestKroExamples(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(root, "bin", "k8s", b)); err != nil {
			t.Fatalf("bin/k8s/%s: %v (make kube-binaries builds it)", b, err)
		}
	}
	checkout := kroCheckout(t)
	entries, err := os.ReadDir("kro")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		if e.IsDir() {
			want = append(want, e.Name())
		}
	}
	if len(want) == 0 {
		t.Fatal("no cases under kro/")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "kro-examples.sh"), checkout)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/kro-examples.sh %s: %v\n%s", checkout, err, out)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^ok   (\S+)$`).FindAllSubmatch(out, -1) {
		got = append(got, string(m[1]))
	}
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("cases ok: %v, want every case of kro/: %v\n%s", got, want, out)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("cases ok: %v, want every case of kro/: %v\n%s", got, want, out)
		}
	}
	t.Logf("kro %s examples: %d cases ok\n%s", kroVersion, len(got), out)
}
