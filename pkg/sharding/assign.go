package sharding

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// bucketShift maps a 64-bit hash to its bucket: the top log2(Buckets) bits.
const bucketShift = 64 - 6

// hash64 is the 64-bit FNV-1a hash of key, the hash of KEP-5866
// (k8s.io/apimachinery/pkg/sharding.HashField prints the same value).
func hash64(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()
}

// rangeBound is the KEP-5866 hex bound of bucket b's start (b in
// [0, Buckets]): "0x" and 16 hex digits, or "0x10000000000000000" (2^64)
// for b == Buckets.
func rangeBound(b int) string {
	if b >= Buckets {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", uint64(b)<<bucketShift)
}

// Assign splits the buckets between members by rendezvous hashing with
// bounded load, from scratch: it is Rebalance(members, no holders).
func Assign(members []string) [Buckets]string {
	return Rebalance(members, [Buckets]string{})
}

// Rebalance returns the assignment of the buckets to members given their
// current holders (current[b] == "" or a name not in members: bucket b is
// free). Members are deduplicated ("" dropped) and sorted by identity.
// With N members, q = Buckets/N and r = Buckets%N, every member ends with
// q or q+1 buckets (exactly r of them with q+1), so shares differ by at
// most one.
//
//  1. Each member keeps its current buckets, those of highest rendezvous
//     weight first, up to q; the r members allowed q+1 are, in identity
//     order, those that hold more than q now, so a member draining its
//     excess keeps its rank while it drains.
//  2. The other buckets, in order 0..Buckets-1, go to the member of
//     highest rendezvous weight (the 64-bit FNV-1a hash of
//     identity+"/"+b, b in decimal; ties: the lower identity) that still
//     has room: fewer than q, or q while fewer than r members hold q+1.
//
// So a member joining takes q' = Buckets/(N+1) buckets from the others and
// nothing else moves; a member leaving frees only its own. It is a pure
// function: members that see the same live set and the same holders
// compute the same assignment; all "" when members is empty.
func Rebalance(members []string, current [Buckets]string) [Buckets]string {
	var out [Buckets]string
	ids := slices.Clone(members)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	n := len(ids)
	if n == 0 {
		return out
	}
	q, r := Buckets/n, Buckets%n
	index := make(map[string]int, n)
	for i, id := range ids {
		index[id] = i
	}
	weight := func(i, b int) uint64 { return hash64(ids[i] + "/" + strconv.Itoa(b)) }

	// 1. keep.
	kept := make([][]int, n)
	for b, h := range current {
		if i, ok := index[h]; ok {
			kept[i] = append(kept[i], b)
		}
	}
	counts := make([]int, n)
	full := 0 // members holding q+1
	for i := range ids {
		k := kept[i]
		limit := q
		if len(k) > q && full < r {
			limit = q + 1
			full++
		}
		if len(k) > limit {
			slices.SortStableFunc(k, func(x, y int) int { return cmpDesc(weight(i, x), weight(i, y)) })
			k = k[:limit]
		}
		for _, b := range k {
			out[b] = ids[i]
		}
		counts[i] = len(k)
	}

	// 2. fill.
	order := make([]int, n)
	weights := make([]uint64, n)
	for b := 0; b < Buckets; b++ {
		if out[b] != "" {
			continue
		}
		for i := range ids {
			weights[i] = weight(i, b)
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return cmpDesc(weights[x], weights[y]) })
		for _, i := range order {
			if counts[i] < q || counts[i] == q && full < r {
				if counts[i] == q {
					full++
				}
				counts[i]++
				out[b] = ids[i]
				break
			}
		}
	}
	return out
}

// cmpDesc orders uint64s from the highest.
func cmpDesc(x, y uint64) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	}
	return 0
}

// AssignedTo returns the buckets that assignment gives to id.
func AssignedTo(assignment [Buckets]string, id string) BucketSet {
	var s BucketSet
	for b, m := range assignment {
		if m == id && id != "" {
			s |= 1 << uint(b)
		}
	}
	return s
}
