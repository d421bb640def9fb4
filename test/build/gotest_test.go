package build

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// summaryModule is a module whose packages fail in every way the summary
// of hack/gotest.sh knows, next to a passing one (c).
var summaryModule = map[string]string{
	"go.mod": "module example.com/summary\n\ngo 1.21\n",
	// Failed tests (one parallel) with their messages, 100 messages, a 200,000-character line.
	"a/a_test.go": `package a

import (
	"strings"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestFails(t *testing.T) {
	t.Parallel()
	t.Log("what it saw")
	t.Errorf("got %d, want 1", 2)
}

func TestLong(t *testing.T) {
	for i := 1; i <= 100; i++ {
		t.Logf("message %03d", i)
	}
	t.Fail()
}

func TestWide(t *testing.T) { t.Error("wide " + strings.Repeat("x", 200000)) }
`,
	"b/b_test.go": "package b\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestHangs(t *testing.T) { time.Sleep(time.Minute) }\n",
	"c/c_test.go": "package c\n\nimport \"testing\"\n\nfunc TestFine(t *testing.T) { t.Log(\"not a failure\") }\n",
	"f/f_test.go": "package f\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tt.Run(\"inner\", func(t *testing.T) { t.Fatal(\"inner broke\") })\n}\n",
	"g/g_test.go": "package g\n\nimport \"testing\"\n\nfunc TestPanics(t *testing.T) { panic(\"boom\") }\n",
	// A panic in a goroutine that a test started.
	"gop/g_test.go": `package gop

import (
	"testing"
	"time"
)

func TestGo(t *testing.T) {
	go func() {
		var m map[string]int
		m["a"] = 1
	}()
	time.Sleep(time.Second)
}
`,
	// A TestMain that stops before running the tests.
	"tm/tm_test.go": `package tm

import (
	"log"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	log.Fatal("cannot start the server")
	os.Exit(m.Run())
}

func TestT(t *testing.T) {}
`,
	// A test that ends the test binary.
	"ex/ex_test.go": `package ex

import (
	"fmt"
	"os"
	"testing"
)

func TestOK(t *testing.T) { fmt.Println("chatty pass") }

func TestExit(t *testing.T) {
	fmt.Println("about to exit")
	os.Exit(1)
}
`,
	"bad/bad_test.go": "package bad\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { x := 1 }\n",
	"vetf/v_test.go":  "package vetf\n\nimport (\n\t\"fmt\"\n\t\"testing\"\n)\n\nfunc TestV(t *testing.T) { fmt.Printf(\"%d\\n\", \"s\") }\n",
	"setup/s_test.go": "package setup\n\nimport (\n\t\"testing\"\n\n\t_ \"example.com/nope\"\n)\n\nfunc TestS(t *testing.T) {}\n",
	"fz/f_test.go":    "package fz\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc FuzzSlow(f *testing.F) {\n\tf.Add(1)\n\tf.Fuzz(func(t *testing.T, n int) { time.Sleep(time.Minute) })\n}\n",
	"exa/e_test.go":   "package exa\n\nimport (\n\t\"fmt\"\n\t\"time\"\n)\n\nfunc Example() {\n\ttime.Sleep(time.Minute)\n\tfmt.Println(\"x\")\n\t// Output: x\n}\n",
}

// writeModule writes files into a new directory and returns it.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	mod := t.TempDir()
	for name, text := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return mod
}

// runGotest runs hack/gotest.sh in dir with GOTEST_LOG=log and extra
// environment, and returns its exit code and combined output.
func runGotest(t *testing.T, dir, log string, env []string, args ...string) (int, string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "gotest.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOTEST_LOG="+log), env...)
	outb, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(outb)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(outb)
}

// summaryOf runs hack/gotest.sh on mod, checks that it exits with go
// test's 1 and that the log keeps the whole output, and returns the
// summary printed at the end and the log.
func summaryOf(t *testing.T, mod string, args ...string) (summary, whole string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "logs", "test.log")
	code, out := runGotest(t, mod, log, nil, args...)
	if code != 1 {
		t.Fatalf("exit %d, want go test's 1; output:\n%s", code, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the log: %v", err)
	}
	_, summary, found := strings.Cut(out, "==> go test failed (exit code 1); what failed, from "+log+":\n")
	if !found {
		t.Fatalf("no summary; output:\n%s", out)
	}
	if !strings.HasPrefix(out, string(b)) {
		t.Errorf("the terminal did not get the log's whole text before the summary")
	}
	return summary, string(b)
}

func checkSummary(t *testing.T, name, summary string, wanted, unwanted []string) {
	t.Helper()
	for _, want := range wanted {
		if !strings.Contains(summary, want) {
			t.Errorf("%s: the summary lacks %q:\n%s", name, want, summary)
		}
	}
	for _, bad := range unwanted {
		if strings.Contains(summary, bad) {
			t.Errorf("%s: the summary has %q:\n%s", name, bad, summary)
		}
	}
}

// TestGotestSummary runs hack/gotest.sh (what make test runs) on a module
// whose packages pass, fail, panic, stop in TestMain or os.Exit, do not
// build, fail vet or setup, and outlive -timeout in a test, a fuzz target
// and an example; with go test's plain, -v and -json output. The exit code
// is go test's, the log keeps the whole output, and the summary at the end
// says what failed and why, without goroutine dumps or passing tests.
func TestGotestSummary(t *testing.T) {
	mod := writeModule(t, summaryModule)
	// Messages the summary keeps from a failed test, and the passing
	// tests' output and goroutine dumps it leaves out.
	messages := []string{
		"--- FAIL: TestFails", "a_test.go:12: what it saw", "a_test.go:13: got 2, want 1",
		"--- FAIL: TestSub/inner", "inner broke", "FAIL\texample.com/summary/a",
	}
	noise := []string{"ok  \t", "TestPasses", "not a failure", "goroutine ", "testing.tRunner", "main.main", "_testmain.go", "chatty pass", "TestOK"}

	summary, whole := summaryOf(t, mod, "-count=1", "-timeout", "3s", "./...")
	if !strings.Contains(whole, "goroutine") || !strings.Contains(whole, "ok  \texample.com/summary/c") ||
		!strings.Contains(whole, strings.Repeat("x", 200000)) {
		t.Errorf("the log lacks the goroutine dump, a passing package or the wide line")
	}
	checkSummary(t, "plain", summary, append([]string{
		// A timeout, in a test, a fuzz target and an example.
		"panic: test timed out after 3s", "running tests:", "TestHangs (", "FAIL\texample.com/summary/b",
		"was running example.com/summary/fz.FuzzSlow", "fz/f_test.go:10", "FAIL\texample.com/summary/fz",
		"was running example.com/summary/exa.Example", "exa/e_test.go:9",
		// Panics and where they happened.
		"panic: boom", "panicked at example.com/summary/g.TestPanics(...)", "g/g_test.go:5",
		"panic: assignment to entry in nil map", "panicked at example.com/summary/gop.TestGo.func1(...)", "gop/g_test.go:11",
		// TestMain and os.Exit.
		"cannot start the server", "FAIL\texample.com/summary/tm",
		"about to exit", "FAIL\texample.com/summary/ex",
		// Build, vet and setup failures with their reasons.
		"declared and not used: x", "FAIL\texample.com/summary/bad [build failed]",
		`fmt.Printf format %d has arg "s" of wrong type string`, "FAIL\texample.com/summary/vetf [build failed]",
		"no required module provides package example.com/nope", "FAIL\texample.com/summary/setup [setup failed]",
	}, messages...), noise[:len(noise)-2]) // without -v, a passing test's printed line shows
	checkLongOutput(t, summary)

	// -v prints a test's messages before its "--- FAIL" line, and names
	// the tests that started: the one that called os.Exit, the fuzz target.
	summary, _ = summaryOf(t, mod, "-v", "-count=1", "-timeout", "3s", "./a", "./ex", "./f", "./fz")
	checkSummary(t, "-v", summary, append([]string{
		"TestExit started and did not finish; its output:", "about to exit",
		"FuzzSlow started and did not finish", "was running example.com/summary/fz.FuzzSlow",
	}, messages...), append(noise, "=== "))
	if i, j := strings.Index(summary, "--- FAIL: TestFails"), strings.Index(summary, "what it saw"); i < 0 || j < i {
		t.Errorf("-v: the message does not follow its test's --- FAIL line:\n%s", summary)
	}
	checkLongOutput(t, summary)

	// -json: the summary comes from the text the events carry.
	summary, _ = summaryOf(t, mod, "-json", "-count=1", "./a", "./f", "./g", "./tm", "./bad")
	checkSummary(t, "-json", summary, append([]string{
		"panicked at example.com/summary/g.TestPanics(...)", "cannot start the server",
		"declared and not used: x", "FAIL\texample.com/summary/bad [build failed]",
	}, messages...), append(noise, `"Action"`))
}

// checkLongOutput checks that the summary keeps the first and last 20 of
// TestLong's 100 messages, says how many it left out, and cuts the wide line.
func checkLongOutput(t *testing.T, summary string) {
	t.Helper()
	var wanted, unwanted []string
	for i := 1; i <= 100; i++ {
		if m := fmt.Sprintf("message %03d", i); i <= 20 || i > 80 {
			wanted = append(wanted, m)
		} else {
			unwanted = append(unwanted, m)
		}
	}
	wanted = append(wanted, "... 60 lines left out, they are in ", "wide xxx", " more characters cut]")
	checkSummary(t, "long output", summary, wanted, unwanted)
	for _, line := range strings.Split(summary, "\n") {
		if len(line) > 600 {
			t.Errorf("a summary line of %d characters: %.100s...", len(line), line)
		}
	}
}

// TestGotestLogUnwritable checks that hack/gotest.sh stops with exit code 2
// and names the log when GOTEST_LOG cannot be written, before running go test.
func TestGotestLogUnwritable(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	fakeGo := filepath.Join(dir, "go")
	if err := os.WriteFile(fakeGo, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, log := range []string{"/proc/nope/t.log", dir} {
		code, out := runGotest(t, dir, log, []string{"GO=" + fakeGo}, "./...")
		if code != 2 || !strings.Contains(out, "cannot write the log file "+log) {
			t.Errorf("GOTEST_LOG=%s: exit %d, want 2 with a message naming it; output:\n%s", log, code, out)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("GOTEST_LOG=%s: go test ran", log)
		}
	}
}
