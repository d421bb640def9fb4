package build

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toolDir returns a directory holding links to the named commands only,
// to run a script with a PATH that lacks everything else.
func toolDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			t.Fatalf("%s is needed to run this test: %v", n, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// script runs a hack/ script with PATH set to path; it returns the
// combined output and the exit code.
func script(t *testing.T, path string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "..", "hack", name)}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+path)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// basics are the commands the scripts themselves use.
var basics = []string{"bash", "dirname", "awk", "sed"}

func TestPrereqsAllPresent(t *testing.T) {
	out, code := script(t, os.Getenv("PATH"), "prereqs.sh")
	if code != 0 || !strings.Contains(out, "prerequisites:") || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	if out, code := script(t, os.Getenv("PATH"), "prereqs.sh", "--quiet"); code != 0 || out != "" {
		t.Fatalf("--quiet: exit %d, output %q", code, out)
	}
}

func TestPrereqsNamesEachMissingTool(t *testing.T) {
	dir := toolDir(t, append(basics, "go")...)
	out, code := script(t, dir, "prereqs.sh")
	if code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out)
	}
	for _, tool := range []string{"make", "curl", "openssl", "python3"} {
		if !strings.Contains(out, "prerequisite missing: "+tool+":") {
			t.Errorf("no line for %s in:\n%s", tool, out)
		}
	}
	if strings.Contains(out, "missing: go") {
		t.Errorf("go is present but reported:\n%s", out)
	}
}

func TestPrereqsOldGo(t *testing.T) {
	dir := toolDir(t, append(basics, "make", "curl", "openssl", "python3")...)
	fake := "#!/bin/sh\n[ \"$1 $2\" = \"env GOVERSION\" ] && echo go1.21.3\n"
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := script(t, dir, "prereqs.sh")
	if code != 1 || !strings.Contains(out, "go: found 1.21.3, go.mod needs 1.26") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	// No Go at all.
	if err := os.Remove(filepath.Join(dir, "go")); err != nil {
		t.Fatal(err)
	}
	if out, code := script(t, dir, "prereqs.sh"); code != 1 || !strings.Contains(out, "prerequisite missing: go: install Go 1.26") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

func TestTimedAnnouncesAndTimes(t *testing.T) {
	path := os.Getenv("PATH")
	out, code := script(t, path, "timed.sh", "building x", "about 1 second", "true")
	if code != 0 || !strings.Contains(out, "==> building x (usually about 1 second)") || !strings.Contains(out, "==> building x: done in 0m 0") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	out, code = script(t, path, "timed.sh", "building y", "a while", "sh", "-c", "exit 3")
	if code != 3 || !strings.Contains(out, "==> building y: FAILED after 0m 0") || !strings.Contains(out, "(exit code 3)") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}
