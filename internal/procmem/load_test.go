package procmem

import (
	"testing"
	"time"
)

// TestReleaseAfterLargeLoads: the free pages are released after a load of
// at least LoadReleaseMinObjects objects, at most once per LoadReleaseInterval.
func TestReleaseAfterLargeLoads(t *testing.T) {
	now := time.Unix(1000, 0)
	calls := 0
	m := &loadReleaser{release: func() { calls++ }, now: func() time.Time { return now }}
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
		now = now.Add(s.advance)
		if got := m.afterLoad(s.objects); got != s.want {
			t.Fatalf("step %d (%d objects): released %v, want %v", i, s.objects, got, s.want)
		}
	}
	if calls != 2 {
		t.Fatalf("released %d times, want 2", calls)
	}
}
