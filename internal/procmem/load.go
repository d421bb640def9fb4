package procmem

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Returning the heap's free pages after a large initial load.
//
// A controller's start lists every object it watches and processes all of
// them at once (an Operator runs its pipeline over its source objects and
// fills its views, whose watchers then receive them all; a hook controller
// syncs every parent, calling its hook and writing its children and
// status): decoding the lists, the first batch, the events sent to the
// views' watchers, the hook's requests and answers make garbage of the
// order of what is kept, and the Go runtime keeps the pages it grew into
// (up to about twice the live heap, at the default GOGC) until the heap
// needs them again. After a start that loaded at least
// LoadReleaseMinObjects objects, the manager waits until the process has
// settled (it allocated less than LoadSettleBytes over the last
// LoadSettleWindow, or LoadSettleMaxWait passed) and then returns them to
// the OS (debug.FreeOSMemory: a collection, then every free page
// released), at most once per LoadReleaseInterval, so that many
// controllers starting together cost one collection. Measured by `make
// bench-scale`: at 10k pods the manager's RSS after the sync fell from
// 1.7x to about 1.2x a bare informer's per pod with a release right after
// the start, and waiting for the process to settle (the view API server
// sending the views to their watchers after that) took it to 1.12x at 10k
// and 0.94x at 100k (1.20-1.25x before).
const (
	LoadReleaseMinObjects = 1000
	LoadReleaseInterval   = time.Minute
	// LoadSettleWindow and LoadSettleBytes: the process has settled when
	// its heap allocations over the last LoadSettleWindow add up to less
	// than LoadSettleBytes (4 MiB/s; a manager done with its load
	// allocates less: after the composite scale benchmark's 2,002 and
	// 40,002 objects the release came 0.52 and 0.67 s after it was
	// scheduled). runtime/metrics' /gc/heap/allocs:bytes is read every
	// loadSettleTick.
	LoadSettleWindow = 500 * time.Millisecond
	LoadSettleBytes  = 2 << 20
	// LoadSettleMaxWait bounds the wait: a process that stays busy gets
	// its pages returned this long after the load was reported.
	LoadSettleMaxWait = time.Minute
	loadSettleTick    = 100 * time.Millisecond
)

type loadReleaser struct {
	mu   sync.Mutex
	last time.Time // when the last release was scheduled
	// release is debug.FreeOSMemory, allocated reads the cumulative heap
	// allocations in bytes, sleep is time.Sleep and now time.Now;
	// replaced in tests.
	release   func()
	allocated func() uint64
	sleep     func(time.Duration)
	now       func() time.Time
	// started runs a scheduled release: in a goroutine of its own (go);
	// tests run it in place.
	started func(func())
}

var afterLoads = &loadReleaser{
	release:   debug.FreeOSMemory,
	allocated: heapAllocated,
	sleep:     time.Sleep,
	now:       time.Now,
	started:   func(f func()) { go f() },
}

// heapAllocated is the cumulative count of bytes allocated in the heap
// (runtime/metrics /gc/heap/allocs:bytes).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// ReleaseAfterLoad is called once a controller's start has processed its
// initial state of objects objects (an Operator's source objects, a hook
// controller's parents and children). When objects is at least
// LoadReleaseMinObjects and no release was scheduled in the last
// LoadReleaseInterval, it schedules one: in the background, once the
// process has settled (see LoadSettleWindow) or LoadSettleMaxWait has
// passed, the heap's free pages are returned to the OS and log gets one
// line with the objects, the wait and the resident set before and after. It
// reports whether it scheduled a release, and does not wait for it.
func ReleaseAfterLoad(objects int, log logr.Logger) bool {
	return afterLoads.afterLoad(objects, log)
}

func (m *loadReleaser) afterLoad(objects int, log logr.Logger) bool {
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
	m.started(func() {
		settled := m.waitSettled()
		before, berr := ReadResident()
		m.release()
		after, aerr := ReadResident()
		kv := []any{"objects", objects, "waited", m.now().Sub(now).Round(time.Millisecond), "settled", settled}
		if berr == nil && aerr == nil {
			kv = append(kv, "rssBytesBefore", before.Total, "rssBytesAfter", after.Total)
		}
		log.Info("returned the free heap pages of a large initial load to the OS", kv...)
	})
	return true
}

// waitSettled returns true once the heap allocations over the last
// LoadSettleWindow add up to less than LoadSettleBytes, false when
// LoadSettleMaxWait passes first.
func (m *loadReleaser) waitSettled() bool {
	start := m.now()
	window := int(LoadSettleWindow / loadSettleTick)
	// At most LoadSettleMaxWait/loadSettleTick (600) samples.
	samples := []uint64{m.allocated()}
	for m.now().Sub(start) < LoadSettleMaxWait {
		m.sleep(loadSettleTick)
		samples = append(samples, m.allocated())
		if n := len(samples); n > window && samples[n-1]-samples[n-1-window] < LoadSettleBytes {
			return true
		}
	}
	return false
}
