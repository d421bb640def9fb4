package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// commandTimeout bounds every one-shot command a test runs (kubectl, dctl,
// helm, a docs block): one that does not end (a delete waiting for a
// finalizer nobody removes, a client waiting for a server that never
// answers) is killed and fails its test with the command named, instead of
// holding the whole package until go test's -timeout, whose report names
// the running test only at the top of a long goroutine dump.
const commandTimeout = 3 * time.Minute

// errCommandTimeout is what runBounded's error wraps when it killed the
// command.
var errCommandTimeout = fmt.Errorf("did not end within %s: killed", commandTimeout)

// runBounded runs cmd as cmd.Run does, but kills it (and stops waiting for
// its output after a few seconds more, cmd.WaitDelay) once commandTimeout
// has passed. The error names the command.
func runBounded(cmd *exec.Cmd) error {
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 5 * time.Second
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(commandTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), errCommandTimeout)
	}
}

// combinedOutputBounded is cmd.CombinedOutput under runBounded's bound.
func combinedOutputBounded(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := runBounded(cmd)
	return b.Bytes(), err
}
