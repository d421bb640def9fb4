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
// bounded load: members are deduplicated and sorted by identity; for each
// bucket b in order 0..Buckets-1 the members are ranked by the 64-bit
// FNV-1a hash of identity+"/"+b (decimal), highest first (ties: the lower
// identity), and b goes to the first whose count is below
// ceil(Buckets/len(members)). The result names the member of each bucket;
// all "" when members is empty. It is a pure function: every member that
// sees the same live set computes the same assignment.
func Assign(members []string) [Buckets]string {
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
	limit := (Buckets + n - 1) / n
	counts := make([]int, n)
	order := make([]int, n)
	weights := make([]uint64, n)
	for b := 0; b < Buckets; b++ {
		suffix := "/" + strconv.Itoa(b)
		for i, id := range ids {
			weights[i] = hash64(id + suffix)
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int {
			switch {
			case weights[x] > weights[y]:
				return -1
			case weights[x] < weights[y]:
				return 1
			}
			return 0
		})
		for _, i := range order {
			if counts[i] < limit {
				counts[i]++
				out[b] = ids[i]
				break
			}
		}
	}
	return out
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
