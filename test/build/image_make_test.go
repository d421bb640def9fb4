package build

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo stands in for go in `make image`: it answers prereqs.sh's version
// query, logs every other invocation to $FAKE_GO_LOG and creates the file of
// `build -o FILE` and the bin/image/oci/index.json of `run ./imagebuild -out DIR`.
const fakeGo = `#!/bin/sh
[ "$1 $2" = "env GOVERSION" ] && { echo go1.26.8; exit 0; }
echo "$*" >> "$FAKE_GO_LOG"
prev=
for a in "$@"; do
  case "$prev" in
    -o) mkdir -p "$(dirname "$a")"; : > "$a" ;;
    -out) mkdir -p "$a/oci"; : > "$a/oci/index.json" ;;
  esac
  prev=$a
done
`

// TestMakeImageRebuildsForAnotherRepository checks that `make image` assembles
// the image again when IMAGE_REPO changes (the archives are tagged with it),
// and not when nothing changed.
func TestMakeImageRebuildsForAnotherRepository(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to run this test: %v", err)
	}
	dir := t.TempDir()
	goPath, log := filepath.Join(dir, "go"), filepath.Join(dir, "go.log")
	if err := os.WriteFile(goPath, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	// assemblies returns the -repository of each imagebuild run so far.
	assemblies := func() []string {
		data, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		var repos []string
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(line, "run ./imagebuild ") {
				continue
			}
			f := strings.Fields(line)
			for i := range f[:len(f)-1] {
				if f[i] == "-repository" {
					repos = append(repos, f[i+1])
				}
			}
		}
		return repos
	}
	makeImage := func(repo string) {
		t.Helper()
		// GOFILES= keeps Go sources edited meanwhile from rebuilding the image.
		cmd := exec.Command("make", "-C", filepath.Join("..", ".."), "image",
			"GO="+goPath, "BIN="+filepath.Join(dir, "bin"), "GOFILES=", "IMAGE_REPO="+repo)
		cmd.Env = append(os.Environ(), "FAKE_GO_LOG="+log)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make image IMAGE_REPO=%s: %v\n%s", repo, err, out)
		}
	}

	makeImage("a.example/dctl")
	if got := assemblies(); len(got) != 1 || got[0] != "a.example/dctl" {
		t.Fatalf("after the first make image, imagebuild ran for %q, want [a.example/dctl]", got)
	}
	makeImage("a.example/dctl")
	if got := assemblies(); len(got) != 1 {
		t.Fatalf("make image with nothing changed ran imagebuild again: %q", got)
	}
	makeImage("b.example/dctl")
	if got := assemblies(); len(got) != 2 || got[1] != "b.example/dctl" {
		t.Fatalf("make image IMAGE_REPO=b.example/dctl ran imagebuild for %q, want [a.example/dctl b.example/dctl]", got)
	}
}
