package testcontrolplane

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// Teardown is a stack of clean-up steps that run once, the last added
// first: at the end of a TestMain (Run), or when the test binary is
// interrupted (OnInterrupt), whichever comes first. It is safe for
// concurrent use.
type Teardown struct {
	mu    sync.Mutex
	steps []func()
	done  bool
	once  sync.Once
}

// Add pushes step; a step added once Run has begun runs at once.
func (t *Teardown) Add(step func()) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		step()
		return
	}
	t.steps = append(t.steps, step)
	t.mu.Unlock()
}

// Run runs the steps, the last added first. A call while another runs
// them waits until they are done; later calls do nothing.
func (t *Teardown) Run() {
	t.once.Do(func() {
		t.mu.Lock()
		steps := t.steps
		t.steps, t.done = nil, true
		t.mu.Unlock()
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
	})
}

// OnInterrupt runs t when the test binary receives SIGINT, SIGTERM or
// SIGHUP (Ctrl-C in a terminal, a CI runner cancelling the job, a closed
// terminal) and then exits with 128 plus the signal's number, as a shell
// reports a process killed by it. Without it the binary dies at once and
// its deferred steps never run: envtest starts etcd and kube-apiserver in
// process groups of their own (a terminal's Ctrl-C does not reach them),
// so they would outlive the tests with their data directories. Further
// signals during the teardown are ignored, as dying then would leave
// those processes behind all the same (the teardown is bounded: envtest
// kills a process that has not stopped StopTimeout after SIGTERM). name
// prefixes the message printed on the interrupt.
//
// The returned function stops listening; call it at the end of a normal
// run, before t.Run. Once a signal has come it never returns: the tests,
// failing as the control plane goes, end the run too, and the exit is
// the interrupt's, after its teardown.
func OnInterrupt(name string, t *Teardown) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	quit := make(chan struct{})
	var interrupted atomic.Bool
	var once sync.Once
	go func() {
		select {
		case s := <-sigs:
			interrupted.Store(true)
			fmt.Fprintf(os.Stderr, "%s: %v: stopping the control plane and removing its data (further interrupts are ignored until done)\n", name, s)
			go func() {
				for range sigs { // ignored: see above
				}
			}()
			t.Run()
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			os.Exit(code)
		case <-quit:
		}
	}()
	return func() {
		once.Do(func() {
			if !interrupted.Load() {
				signal.Stop(sigs)
			}
			close(quit)
		})
		if interrupted.Load() {
			select {} // the interrupt's teardown exits
		}
	}
}
