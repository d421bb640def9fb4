package testcontrolplane

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptChildEnv makes the test binary, run again by
// TestOnInterruptRunsTeardown, the interrupted child: it registers a
// teardown whose steps write the named file and, as a suite's TestMain
// does when its tests fail because the control plane went away, ends its
// run (stop, then Run, then exit 1) while the interrupt's teardown is
// under way.
const interruptChildEnv = "TESTCONTROLPLANE_INTERRUPT_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(interruptChildEnv); path != "" {
		var t Teardown
		begun := make(chan struct{})
		t.Add(func() { _ = os.WriteFile(path, []byte("first added"), 0o600) })
		t.Add(func() {
			close(begun)
			time.Sleep(200 * time.Millisecond)
			_ = os.WriteFile(path, []byte("last added"), 0o600)
		})
		stop := OnInterrupt("child", &t)
		os.Stdout.WriteString("ready\n")
		<-begun
		stop()
		t.Run()
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestOnInterruptRunsTeardown runs a process that registers a teardown
// with OnInterrupt, sends it each signal a terminal or a CI runner sends,
// and a second one while the teardown runs, and checks that the teardown
// ran to its end (all of it, the last added first) although the process's
// main path ended the run meanwhile, and that the exit status is 128 plus
// the signal's number.
func TestOnInterruptRunsTeardown(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "torn-down")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), interruptChildEnv+"="+path)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len("ready\n"))
			if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
				t.Fatalf("child did not get ready: %q, %v", buf, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// A second one, as an impatient user's, while the teardown's
			// slow step runs: ignored.
			time.Sleep(50 * time.Millisecond)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 128+int(sig) {
				t.Fatalf("child's exit: %v, want status %d; stderr: %s", err, 128+int(sig), stderr.String())
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "first added" {
				t.Fatalf("teardown wrote %q (%v), want the first added step to run last", got, err)
			}
			if !strings.Contains(stderr.String(), "child: "+sig.String()+": stopping the control plane") {
				t.Errorf("child's stderr %q does not say why it stops", stderr.String())
			}
		})
	}
}

// TestTeardownRunsOnce checks the order of the steps, that a second Run
// does nothing and that a step added after Run runs at once.
func TestTeardownRunsOnce(t *testing.T) {
	var td Teardown
	var got []int
	td.Add(func() { got = append(got, 1) })
	td.Add(func() { got = append(got, 2) })
	td.Run()
	td.Run()
	td.Add(func() { got = append(got, 3) })
	if want := []int{2, 1, 3}; len(got) != len(want) || got[0] != 2 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("steps ran %v, want %v", got, want)
	}
}
