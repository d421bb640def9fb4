package build

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGotestSummary runs hack/gotest.sh (what make test runs) on a module
// with a passing test, a failing one and one that outlives -timeout: the
// exit code is go test's, the log keeps the whole output, and the summary
// at the end names the failed test with its messages, both failed packages
// and the test that was running at the timeout.
func TestGotestSummary(t *testing.T) {
	mod := t.TempDir()
	files := map[string]string{
		"go.mod":      "module example.com/summary\n\ngo 1.21\n",
		"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestPasses(t *testing.T) {}\n\nfunc TestFails(t *testing.T) {\n\tt.Log(\"what it saw\")\n\tt.Errorf(\"got %d, want 1\", 2)\n}\n",
		"b/b_test.go": "package b\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestHangs(t *testing.T) { time.Sleep(time.Minute) }\n",
		"c/c_test.go": "package c\n\nimport \"testing\"\n\nfunc TestFine(t *testing.T) { t.Log(\"not a failure\") }\n",
		"f/f_test.go": "package f\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tt.Run(\"inner\", func(t *testing.T) { t.Fatal(\"inner broke\") })\n}\n",
		"g/g_test.go": "package g\n\nimport \"testing\"\n\nfunc TestPanics(t *testing.T) { panic(\"boom\") }\n",
	}
	for name, text := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(t.TempDir(), "logs", "test.log")
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "gotest.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, "-count=1", "-timeout", "5s", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOTEST_LOG="+log)
	outb, err := cmd.CombinedOutput()
	out, code := string(outb), 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Fatalf("exit %d, want go test's 1; output:\n%s", code, out)
	}
	whole, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the log: %v", err)
	}
	if !strings.Contains(string(whole), "goroutine") || !strings.Contains(string(whole), "ok  \texample.com/summary/c") {
		t.Errorf("the log lacks the goroutine dump or a passing package:\n%s", whole)
	}
	_, summary, found := strings.Cut(out, "==> go test failed (exit code 1); what failed, from "+log+":\n")
	if !found {
		t.Fatalf("no summary; output:\n%s", out)
	}
	for _, want := range []string{
		"--- FAIL: TestFails", "a_test.go:8: what it saw", "a_test.go:9: got 2, want 1",
		"FAIL\texample.com/summary/a",
		"panic: test timed out after 5s", "running tests:", "TestHangs (",
		"FAIL\texample.com/summary/b",
		"--- FAIL: TestSub/inner", "inner broke",
		"panic: boom",
		"FAIL\texample.com/summary/g",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	for _, unwanted := range []string{"ok  \t", "TestPasses", "not a failure", "goroutine "} {
		if strings.Contains(summary, unwanted) {
			t.Errorf("the summary has %q:\n%s", unwanted, summary)
		}
	}
}
