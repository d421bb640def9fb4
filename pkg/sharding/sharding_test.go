package sharding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	serversharding "k8s.io/apiserver/pkg/sharding"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestBucket(t *testing.T) {
	for _, key := range []string{"", "a", "default", "kube-system", "0b5c0b4e-7a59-4f4e-9a38-0d7e1a2b3c4d", strings.Repeat("x", 300)} {
		h, err := strconv.ParseUint(apisharding.HashField(key), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Bucket(key), int(h>>58); got != want {
			t.Errorf("Bucket(%q) = %d, want %d (top 6 bits of HashField)", key, got, want)
		}
		start, end := Range(Bucket(key))
		hex := "0x" + apisharding.HashField(key)
		if apisharding.HexLess(hex, start) || !apisharding.HexLess(hex, end) {
			t.Errorf("hash %s of %q is outside Range(%d) = [%s, %s)", hex, key, Bucket(key), start, end)
		}
	}
}

func TestRange(t *testing.T) {
	for _, tc := range []struct {
		b          int
		start, end string
	}{
		{0, "0x0000000000000000", "0x0400000000000000"},
		{1, "0x0400000000000000", "0x0800000000000000"},
		{32, "0x8000000000000000", "0x8400000000000000"},
		{63, "0xfc00000000000000", "0x10000000000000000"},
	} {
		start, end := Range(tc.b)
		if start != tc.start || end != tc.end {
			t.Errorf("Range(%d) = %s, %s; want %s, %s", tc.b, start, end, tc.start, tc.end)
		}
	}
	for b := 1; b < Buckets; b++ {
		_, prevEnd := Range(b - 1)
		if start, _ := Range(b); start != prevEnd {
			t.Errorf("Range(%d) starts at %s, Range(%d) ends at %s", b, start, b-1, prevEnd)
		}
	}
}

func set(bs ...int) BucketSet {
	var s BucketSet
	for _, b := range bs {
		s |= 1 << uint(b)
	}
	return s
}

func TestBucketSetString(t *testing.T) {
	for _, tc := range []struct {
		s    BucketSet
		want string
	}{
		{0, ""},
		{set(5), "5"},
		{set(0, 1, 2, 3, 17), "0-3,17"},
		{set(0, 2, 4), "0,2,4"},
		{AllBuckets, "0-63"},
		{set(62, 63), "62-63"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%#x.String() = %q, want %q", uint64(tc.s), got, tc.want)
		}
		if got := len(tc.s.List()); got != tc.s.Count() {
			t.Errorf("%#x: List has %d buckets, Count says %d", uint64(tc.s), got, tc.s.Count())
		}
	}
}

func TestSelector(t *testing.T) {
	for _, tc := range []struct {
		s     BucketSet
		field string
		want  string
	}{
		{0, "object.metadata.uid", ""},
		{AllBuckets, "object.metadata.uid", "shardRange(object.metadata.uid, '0x0000000000000000', '0x10000000000000000')"},
		{set(0, 1, 2, 3, 17), "object.metadata.namespace",
			"shardRange(object.metadata.namespace, '0x0000000000000000', '0x1000000000000000') || " +
				"shardRange(object.metadata.namespace, '0x4400000000000000', '0x4800000000000000')"},
		{set(63), "object.metadata.uid", "shardRange(object.metadata.uid, '0xfc00000000000000', '0x10000000000000000')"},
	} {
		got := Selector(tc.s, tc.field)
		if got != tc.want {
			t.Errorf("Selector(%s, %s) = %q, want %q", tc.s, tc.field, got, tc.want)
			continue
		}
		if got == "" {
			continue
		}
		parsed, err := serversharding.Parse(got)
		if err != nil {
			t.Errorf("Parse(%q): %v", got, err)
		} else if parsed.String() != got {
			t.Errorf("Parse(%q).String() = %q", got, parsed.String())
		}
	}
}

// TestSelectorMatches checks that the selector of a random set matches
// exactly the objects whose UID (or namespace) falls in a bucket of the set.
func TestSelectorMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, field := range []string{"object.metadata.uid", "object.metadata.namespace"} {
		for i := range 50 {
			s := BucketSet(rng.Uint64())
			if i%5 == 0 {
				s &= BucketSet(rng.Uint64()) & BucketSet(rng.Uint64()) // sparse sets
			}
			if s == 0 {
				continue
			}
			sel, err := serversharding.Parse(Selector(s, field))
			if err != nil {
				t.Fatalf("Parse(Selector(%s)): %v", s, err)
			}
			for range 200 {
				key := uuid.NewString()
				obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID(key), Namespace: key}}
				ok, err := sel.Matches(obj)
				if err != nil {
					t.Fatal(err)
				}
				if ok != s.Has(Bucket(key)) {
					t.Fatalf("%s of %s: selector matches %q = %v, bucket %d in set = %v", field, s, key, ok, Bucket(key), s.Has(Bucket(key)))
				}
			}
		}
	}
}

func members(n int, prefix string) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d-%s", prefix, i, randSuffix(5))
	}
	return ids
}

// shares returns the number of buckets per member; it fails on a bucket
// given to a non-member or to nobody.
func shares(t *testing.T, a [Buckets]string, ids []string) map[string]int {
	t.Helper()
	c := map[string]int{}
	for _, id := range ids {
		c[id] = 0
	}
	for b, id := range a {
		if _, ok := c[id]; !ok {
			t.Fatalf("bucket %d assigned to %q, not a member of %v", b, id, ids)
		}
		c[id]++
	}
	return c
}

func moved(a, b [Buckets]string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

func TestAssignBalancedAndDeterministic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 10, 16, 31, 63, 64, 65, 100} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ids := members(n, "dcontroller")
			a := Assign(ids)
			lo, hi := Buckets/n, (Buckets+n-1)/n
			if n > Buckets {
				lo, hi = 0, 1
			}
			for id, c := range shares(t, a, ids) {
				if c < lo || c > hi {
					t.Errorf("%s holds %d buckets, want %d..%d", id, c, lo, hi)
				}
			}
			shuffled := slices.Clone(ids)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if b := Assign(append(shuffled, shuffled[0])); b != a {
				t.Errorf("Assign depends on the order of members or duplicates")
			}
			if b := Rebalance(ids, a); b != a {
				t.Errorf("Rebalance(ids, Assign(ids)) moved %d buckets; want a fixed point", moved(a, b))
			}
		})
	}
	if a := Assign(nil); a != [Buckets]string{} {
		t.Errorf("Assign(nil) = %v, want all free", a)
	}
}

// TestRebalanceMoves checks that one member joining or leaving a converged
// ring moves only the buckets that must move, and that the result stays
// balanced and is a fixed point.
func TestRebalanceMoves(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 6, 8, 10, 13, 20, 40, 63} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			for trial := range 10 {
				ids := members(n, fmt.Sprintf("m%d", trial))
				before := Assign(ids)

				joined := append(slices.Clone(ids), "newcomer-"+randSuffix(5))
				after := Rebalance(joined, before)
				if got, want := moved(before, after), Buckets/(n+1); got > want {
					t.Errorf("join to %d members moved %d buckets, want at most %d", n, got, want)
				}
				checkBalanced(t, after, joined)

				if n == 1 {
					continue
				}
				k := trial % n
				left := slices.Delete(slices.Clone(ids), k, k+1)
				after = Rebalance(left, before)
				if got, want := moved(before, after), AssignedTo(before, ids[k]).Count(); got != want {
					t.Errorf("%s leaving %d members moved %d buckets, want its own %d", ids[k], n, got, want)
				}
				checkBalanced(t, after, left)
			}
		})
	}
}

// TestRebalanceWhileDraining checks that the assignment does not change
// while members release their excess one bucket at a time (as they do,
// one Lease update after the other, seen by others in between).
func TestRebalanceWhileDraining(t *testing.T) {
	for _, n := range []int{2, 3, 5, 7, 9} {
		ids := members(n, "d")
		holders := Assign(ids)
		joined := append(slices.Clone(ids), "joiner")
		target := Rebalance(joined, holders)
		for b := range Buckets {
			if holders[b] != target[b] && holders[b] != "" {
				holders[b] = "" // released
				if got := Rebalance(joined, holders); got != target {
					t.Fatalf("n=%d: after releasing bucket %d the assignment moved %d buckets", n, b, moved(got, target))
				}
			}
		}
	}
}

func checkBalanced(t *testing.T, a [Buckets]string, ids []string) {
	t.Helper()
	n := len(ids)
	for id, c := range shares(t, a, ids) {
		if c < Buckets/n || c > (Buckets+n-1)/n {
			t.Errorf("%s holds %d buckets of %d among %d members", id, c, Buckets, n)
		}
	}
	if a2 := Rebalance(ids, a); a2 != a {
		t.Errorf("not a fixed point: %d buckets move again", moved(a, a2))
	}
}

func TestNewValidates(t *testing.T) {
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "127.0.0.1:1"}) // never called
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no client", Options{Namespace: "ns"}, "Client is required"},
		{"no namespace", Options{Client: cs}, "Namespace is required"},
		{"renew deadline", Options{Client: cs, Namespace: "ns", LeaseDuration: 2e9, RenewDeadline: 2e9}, "RenewDeadline (2s) must be shorter than LeaseDuration (2s)"},
		{"retry period", Options{Client: cs, Namespace: "ns", RetryPeriod: 10e9}, "RetryPeriod (10s) must be shorter than RenewDeadline (10s)"},
		{"identity", Options{Client: cs, Namespace: "ns", Identity: "Pod_1"}, `identity "Pod_1" must be a DNS label`},
		{"ring", Options{Client: cs, Namespace: "ns", Ring: "a.b"}, `ring "a.b" must be a DNS label`},
		{"ok", Options{Client: cs, Namespace: "ns", Identity: "pod-1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if r.Identity() != "pod-1" || r.opts.Ring != DefaultRing || r.opts.LeaseDuration != DefaultLeaseDuration {
					t.Errorf("defaults: %+v", r.opts)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaultIdentity(t *testing.T) {
	id := DefaultIdentity()
	if _, err := New(Options{Client: kubernetes.NewForConfigOrDie(&rest.Config{Host: "127.0.0.1:1"}), Namespace: "ns", Identity: id}); err != nil {
		t.Errorf("DefaultIdentity() = %q: %v", id, err)
	}
	if id == DefaultIdentity() {
		t.Errorf("DefaultIdentity() returned %q twice", id)
	}
}

func TestNilRing(t *testing.T) {
	var r *Ring
	release, ok := r.Acquire("x")
	release()
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"Owns", r.Owns("x"), true},
		{"Acquire", ok, true},
		{"Held", r.Held(), AllBuckets},
		{"Identity", r.Identity(), ""},
		{"Members", r.Members() == nil, true},
		{"NeedLeaderElection", r.NeedLeaderElection(), false},
	} {
		if tc.got != tc.want {
			t.Errorf("nil Ring: %s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}
