package sharding

import (
	"fmt"
	"testing"
)

// TestNameBucketSpreads: names that differ only in their last characters
// share one FNV-1a bucket (the top bits of the hash), but spread over the
// buckets with NameBucket; three members get a fair share of 30 such
// Operators.
func TestNameBucketSpreads(t *testing.T) {
	raw, mixed := map[int]bool{}, map[int]bool{}
	var names []string
	for i := 0; i < 30; i++ {
		n := fmt.Sprintf("op-%d", i)
		names = append(names, n)
		raw[Bucket(n)] = true
		mixed[NameBucket(n)] = true
	}
	if len(mixed) < 20 {
		t.Errorf("NameBucket spreads 30 names over %d buckets, want at least 20", len(mixed))
	}
	a := Assign([]string{"m1", "m2", "m3"})
	per := map[string]int{}
	for _, n := range names {
		per[a[NameBucket(n)]]++
	}
	for m, n := range per {
		if n > 15 {
			t.Errorf("member %s runs %d of 30 operators", m, n)
		}
	}
	if len(per) != 3 {
		t.Errorf("operators per member: %v", per)
	}
	// The raw hash of similar short names stays in few buckets: the reason
	// NameBucket exists.
	if len(raw) >= len(mixed) {
		t.Errorf("raw FNV-1a spread %d ≥ mixed %d", len(raw), len(mixed))
	}
}
