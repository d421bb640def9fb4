package operator

import (
	"runtime/debug"
	"sync"
	"time"
)

// Returning the heap's free pages after a large initial load.
//
// An operator's start lists every source object and runs the pipeline
// over all of them at once: decoding the list and the first batch make
// garbage of the order of what is kept, and the Go runtime keeps the
// pages it grew into (up to about twice the live heap, at the default
// GOGC) until the heap needs them again. After a start that loaded at
// least releaseMinObjects objects, the manager returns them to the OS
// (debug.FreeOSMemory: a collection, then every free page released), at
// most once per releaseInterval, so that many operators starting
// together cost one collection. Measured by `make bench-scale`: at 10k
// pods the manager's RSS after the sync fell from 1.7x to about 1.1x a
// bare informer's per pod.
const (
	releaseMinObjects = 1000
	releaseInterval   = time.Minute
)

type memoryReleaser struct {
	mu      sync.Mutex
	last    time.Time
	release func() // debug.FreeOSMemory; replaced in tests
	now     func() time.Time
}

var startupRelease = &memoryReleaser{release: debug.FreeOSMemory, now: time.Now}

// afterLoad is called once an operator's controllers have run their
// initial state of objects source objects through the pipeline. It
// reports whether the free pages were released.
func (m *memoryReleaser) afterLoad(objects int) bool {
	if objects < releaseMinObjects {
		return false
	}
	m.mu.Lock()
	now := m.now()
	if !m.last.IsZero() && now.Sub(m.last) < releaseInterval {
		m.mu.Unlock()
		return false
	}
	m.last = now
	m.mu.Unlock()
	m.release()
	return true
}
