package procmem

import (
	"fmt"
	"runtime/debug"
	"runtime/metrics"
)

// StartupHeapMax is the largest live heap, in bytes, whose free pages
// ReleaseStartupPages returns. Returning them (debug.FreeOSMemory) starts
// with a full collection, whose cost grows with the live heap: a start-up
// heap is a few MiB (an idle manager's: 8-11 MiB), but a release that
// comes while an Operator holds tens of thousands of objects (the one 10 s
// after the caches' sync, when the Operator was created a few seconds
// after the manager) collected 645 MiB, about 330 ms of two cores, and a
// change waiting behind it reached its view 42 ms late (`make bench-scale
// N=50000`). Such a heap is what ReleaseAfterLoad is for: it returns the
// pages of a large load once the process has settled.
const StartupHeapMax = 64 << 20

// ErrHeapKept wraps, in ReleaseStartupPages's error, a live heap over
// StartupHeapMax: the heap's free pages were not returned (the
// executable's pages were released all the same).
var ErrHeapKept = fmt.Errorf("the live heap is over %d MiB: its free pages stay with the Go runtime", StartupHeapMax>>20)

// freeStartupHeap returns the heap's free pages to the operating system
// (debug.FreeOSMemory) when the live heap of the last collection
// (runtime/metrics /gc/heap/live:bytes) is at most StartupHeapMax, and
// returns nil; otherwise it returns an error wrapping ErrHeapKept with the
// live heap's size.
func freeStartupHeap() error {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > StartupHeapMax {
		return fmt.Errorf("%w (%.1f MiB)", ErrHeapKept, float64(s[0].Value.Uint64())/(1<<20))
	}
	debug.FreeOSMemory()
	return nil
}
