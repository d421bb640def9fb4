package procmem

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// fakeLoad is a loadReleaser on a fake clock whose heap allocates rate
// bytes per second of it; releases records when each release ran.
type fakeLoad struct {
	now      time.Time
	rate     func(elapsed time.Duration) uint64 // bytes per second at elapsed
	start    time.Time
	alloc    uint64
	releases []time.Duration
}

func (f *fakeLoad) releaser() *loadReleaser {
	f.start = f.now
	return &loadReleaser{
		release:   func() { f.releases = append(f.releases, f.now.Sub(f.start)) },
		allocated: func() uint64 { return f.alloc },
		sleep: func(d time.Duration) {
			f.alloc += f.rate(f.now.Sub(f.start)) * uint64(d) / uint64(time.Second)
			f.now = f.now.Add(d)
		},
		now:     func() time.Time { return f.now },
		started: func(run func()) { run() },
	}
}

// TestReleaseAfterLargeLoads: a release is scheduled after a load of at
// least LoadReleaseMinObjects objects, at most once per
// LoadReleaseInterval.
func TestReleaseAfterLargeLoads(t *testing.T) {
	f := &fakeLoad{now: time.Unix(1000, 0), rate: func(time.Duration) uint64 { return 0 }}
	m := f.releaser()
	steps := []struct {
		objects int
		advance time.Duration
		want    bool
	}{
		{LoadReleaseMinObjects - 1, 0, false},  // small: nothing to give back
		{LoadReleaseMinObjects, 0, true},       // large: released
		{10 * LoadReleaseMinObjects, 0, false}, // again at once: one collection serves both
		{LoadReleaseMinObjects, LoadReleaseInterval - time.Second, false},
		{LoadReleaseMinObjects, time.Second, true}, // an interval later
	}
	for i, s := range steps {
		f.now = f.now.Add(s.advance)
		if got := m.afterLoad(s.objects, logr.Discard()); got != s.want {
			t.Fatalf("step %d (%d objects): released %v, want %v", i, s.objects, got, s.want)
		}
	}
	if len(f.releases) != 2 {
		t.Fatalf("released %d times, want 2", len(f.releases))
	}
}

// TestReleaseWaitsUntilSettled: the release comes once the allocations
// over LoadSettleWindow fall under LoadSettleBytes (here 3 s of a busy
// process, then quiet: the first quiet window ends 3.5 s in), or after
// LoadSettleMaxWait for a process that stays busy.
func TestReleaseWaitsUntilSettled(t *testing.T) {
	busyFor := func(d time.Duration) func(time.Duration) uint64 {
		return func(at time.Duration) uint64 {
			if at < d {
				return 64 << 20 // 64 MiB/s: encoding a large list
			}
			return 16 << 10 // idle
		}
	}
	for _, c := range []struct {
		name string
		rate func(time.Duration) uint64
		want time.Duration
	}{
		{"quiet at once", busyFor(0), LoadSettleWindow},
		{"busy, then quiet", busyFor(3 * time.Second), 3*time.Second + LoadSettleWindow},
		{"just under the bound", func(time.Duration) uint64 { return 2*LoadSettleBytes - 1<<10 }, LoadSettleWindow},
		{"at the bound", func(time.Duration) uint64 { return 2*LoadSettleBytes + 100 }, LoadSettleMaxWait}, // + rounding of the fake clock
		{"busy throughout", busyFor(time.Hour), LoadSettleMaxWait},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeLoad{now: time.Unix(1000, 0), rate: c.rate}
			if !f.releaser().afterLoad(LoadReleaseMinObjects, logr.Discard()) {
				t.Fatal("no release scheduled")
			}
			if len(f.releases) != 1 || f.releases[0] != c.want {
				t.Fatalf("released at %v, want once at %v", f.releases, c.want)
			}
		})
	}
}

// TestHeapAllocatedCounts: the runtime's counter of heap allocations grows
// by at least what is allocated.
func TestHeapAllocatedCounts(t *testing.T) {
	before := heapAllocated()
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	if got := heapAllocated() - before; got < 64*64<<10 {
		t.Fatalf("heap allocations grew by %d bytes after allocating %d", got, 64*64<<10)
	}
	_ = keep
}
