package procmem

import (
	"runtime/debug"
	"sync"
	"time"
)

// Returning the heap's free pages after a large initial load.
//
// A controller's start lists every object it watches and processes all of
// them at once (an Operator runs its pipeline over its source objects; a
// hook controller syncs every parent, calling its hook and writing its
// children and status): decoding the lists, the first batch, the hook's
// requests and answers make garbage of the order of what is kept, and the
// Go runtime keeps the pages it grew into (up to about twice the live
// heap, at the default GOGC) until the heap needs them again. After a
// start that loaded at least LoadReleaseMinObjects objects, the manager
// returns them to the OS (debug.FreeOSMemory: a collection, then every
// free page released), at most once per LoadReleaseInterval, so that many
// controllers starting together cost one collection. Measured by `make
// bench-scale`: at 10k pods the manager's RSS after the sync fell from
// 1.7x to about 1.1x a bare informer's per pod.
const (
	LoadReleaseMinObjects = 1000
	LoadReleaseInterval   = time.Minute
)

type loadReleaser struct {
	mu      sync.Mutex
	last    time.Time
	release func() // debug.FreeOSMemory; replaced in tests
	now     func() time.Time
}

var afterLoads = &loadReleaser{release: debug.FreeOSMemory, now: time.Now}

// ReleaseAfterLoad is called once a controller's start has processed its
// initial state of objects objects (an Operator's source objects, a hook
// controller's parents and children). It returns the heap's free pages to
// the OS when objects is at least LoadReleaseMinObjects and no release
// happened in the last LoadReleaseInterval, and reports whether it did.
func ReleaseAfterLoad(objects int) bool { return afterLoads.afterLoad(objects) }

func (m *loadReleaser) afterLoad(objects int) bool {
	if objects < LoadReleaseMinObjects {
		return false
	}
	m.mu.Lock()
	now := m.now()
	if !m.last.IsZero() && now.Sub(m.last) < LoadReleaseInterval {
		m.mu.Unlock()
		return false
	}
	m.last = now
	m.mu.Unlock()
	m.release()
	return true
}
