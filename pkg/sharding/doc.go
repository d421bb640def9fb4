// Package sharding splits the work of a controller manager between several
// active replicas ("members") with Kubernetes' own machinery: Lease objects
// (coordination.k8s.io/v1) for membership and for fencing, and the 64-bit
// FNV-1a hash of KEP-5866 (server-side sharded list and watch) to place
// objects.
//
// The hash space [0, 2^64) is cut into Buckets equal, contiguous ranges;
// bucket b is [b·2^64/Buckets, (b+1)·2^64/Buckets), so a set of buckets is
// also a KEP-5866 shard selector (shardRange(...) || shardRange(...)). A key
// (an object's UID, an Operator's name, a namespace) belongs to the bucket
// of its hash (k8s.io/apimachinery/pkg/sharding.HashField).
//
// Membership: each member holds a Lease of its own, labelled into one ring,
// and renews it. A member is live while an observer sees its Lease renewed
// within the Lease's duration (measured on the observer's clock, as
// client-go's leader election does).
//
// Assignment: the live members split the buckets deterministically by
// rendezvous hashing with bounded load (Rebalance): every member keeps the
// buckets it holds up to an even share (floor or ceil of Buckets/N), and
// each other bucket goes to the member of highest rendezvous weight that
// still has room. Shares differ by at most one, and a member joining or
// leaving moves only the buckets that must move (about Buckets/N). No
// coordinator is elected: every member computes the same assignment from
// the same set of Leases.
//
// Fencing: each bucket has a Lease too, whose holderIdentity is the member
// that works it. A member starts working a bucket only after it wrote itself
// into that bucket's Lease with an optimistic-concurrency update, which
// succeeds only when the Lease was free (released by its previous holder,
// or held by a member whose own Lease expired). A member releases a bucket
// by first stopping its work there (its OnChange handlers return, the
// guards taken with Acquire are given back), then clearing the holder. A
// member that cannot renew its own Lease for RenewDeadline stops all work
// before others may consider it dead (RenewDeadline < LeaseDuration), and
// does not renew it any more. Writes check the fence themselves too
// (Fence, FenceWrites): a write is refused once the last renewal started
// RenewDeadline ago on the monotonic clock, so a process resumed after a
// stop sends nothing from the syncs it was running. The lease duration a
// peer publishes is capped by Options.MaxPeerLeaseDuration.
package sharding
