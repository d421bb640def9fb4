package sharding

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// Buckets is the number of equal hash ranges the 64-bit hash space is cut
// into; it bounds how finely work can be split (at most Buckets members
// get work).
const Buckets = 64

// Label keys and annotation keys on the Leases of a ring.
const (
	// LabelRing names the ring a Lease belongs to (value: Options.Ring).
	LabelRing = "sharding.dcontroller.io/ring"
	// LabelRole is "member" on member Leases and "bucket" on bucket Leases.
	LabelRole = "sharding.dcontroller.io/role"
	// AnnotationRange on a bucket Lease gives its hash range,
	// "0x<start>-0x<end>" (end exclusive).
	AnnotationRange = "sharding.dcontroller.io/range"
	// AnnotationAddress on a member Lease is the member's Options.Address.
	AnnotationAddress = "sharding.dcontroller.io/address"
	// AnnotationStats on a member Lease is the JSON of the member's
	// Options.Stats, refreshed at each renewal.
	AnnotationStats = "sharding.dcontroller.io/stats"
	// AnnotationIncarnation on a member Lease is a random token of the
	// process that renews it: a second process started with the same
	// identity waits until the first one's Lease expired instead of sharing
	// its buckets, and a process whose Lease another one took over stops.
	AnnotationIncarnation = "sharding.dcontroller.io/incarnation"
)

// Defaults of Options, those of client-go's leader election.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultRing          = "dcontroller"
	// DefaultMaxPeerLeaseFactor: Options.MaxPeerLeaseDuration defaults to
	// this many times Options.LeaseDuration.
	DefaultMaxPeerLeaseFactor = 4
)

// Options configure a Ring.
type Options struct {
	// Client reads and writes the Leases and Events (required).
	Client kubernetes.Interface
	// Namespace of the Leases (required).
	Namespace string
	// Ring names the ring; members of one ring share the work. Lease names
	// start with it. Default DefaultRing.
	Ring string
	// Identity names this member, unique in the ring (a DNS label: its
	// Lease is "<ring>-member-<identity>"). Default: the host name and a
	// random suffix.
	Identity string
	// Address, when set, is published on the member's Lease
	// (AnnotationAddress): where other members reach this one (its view API
	// server).
	Address string
	// LeaseDuration, RenewDeadline and RetryPeriod mean what they mean in
	// client-go's leader election; defaults above. RenewDeadline must be
	// shorter than LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MaxPeerLeaseDuration caps the lease duration another member publishes
	// on its Lease (spec.leaseDurationSeconds), which decides how long
	// after its last renewal it still counts as live and keeps its buckets.
	// Default DefaultMaxPeerLeaseFactor × LeaseDuration; it may not be
	// shorter than LeaseDuration.
	MaxPeerLeaseDuration time.Duration
	// Stats, when set, is called at each renewal; its result is published as
	// JSON on the member's Lease (AnnotationStats) for `dctl status`.
	Stats func() map[string]int64
	// Recorder, when set, receives Events on the member's Lease at each
	// handover (BucketsAcquired, BucketsReleased).
	Recorder events.EventRecorder
	// Logger receives structured logs.
	Logger logr.Logger
}

// BucketSet is a set of buckets, bit b for bucket b.
type BucketSet uint64

// Has reports whether b is in s.
func (s BucketSet) Has(b int) bool { return b >= 0 && b < Buckets && s&(1<<uint(b)) != 0 }

// AllBuckets is the set of every bucket.
const AllBuckets BucketSet = 1<<Buckets - 1

// Count returns the number of buckets in s.
func (s BucketSet) Count() int { return bits.OnesCount64(uint64(s)) }

// List returns the buckets of s in increasing order.
func (s BucketSet) List() []int {
	var out []int
	for b := 0; b < Buckets; b++ {
		if s.Has(b) {
			out = append(out, b)
		}
	}
	return out
}

// String writes s compactly as ranges of adjacent buckets, e.g. "0-3,17";
// "" for the empty set.
func (s BucketSet) String() string {
	var sb strings.Builder
	for b := 0; b < Buckets; {
		if !s.Has(b) {
			b++
			continue
		}
		e := b
		for e+1 < Buckets && s.Has(e+1) {
			e++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(b))
		if e > b {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(e))
		}
		b = e + 1
	}
	return sb.String()
}

// Member is one member of a ring as this member sees it.
type Member struct {
	Identity string
	Address  string
	// Live: its Lease was renewed within its duration.
	Live bool
	// Held are the buckets whose Lease names it holder.
	Held BucketSet
	// Stats as published on its Lease.
	Stats map[string]int64
	// RenewTime of its Lease.
	RenewTime time.Time
}

// Handler is called by a Ring when the buckets this member works change.
// released holds buckets this member stops working: the handler must stop
// every write to objects of those buckets before it returns (the release is
// published only then). acquired holds buckets this member may now work:
// the handler should enqueue their objects. Handlers run one at a time on
// the ring's goroutine; a handler must not call Ring methods that wait on
// the ring (Acquire and Owns do not wait).
type Handler func(acquired, released BucketSet)

// Ring is this member's view of a ring and its share of the work. A nil
// *Ring is sharding turned off: it owns every key.
type Ring struct {
	opts       Options
	log        logr.Logger
	memberName string
	metrics    ringMetrics
	// incarnation identifies this process among those that may use the
	// same identity (AnnotationIncarnation).
	incarnation string

	// held is the BucketSet worked now (owned and not draining); read
	// without locks by Owns and Held.
	held atomic.Uint64

	// guardMu orders Acquire against the start of a release: a bucket's
	// guard count only grows while its bit is in held.
	guardMu   sync.Mutex
	guards    [Buckets]int
	guardFree chan struct{}

	handlersMu sync.Mutex
	handlers   []Handler
	started    atomic.Bool

	// view is the informer's view of the ring (nil before Start).
	view atomic.Pointer[ringView]

	// obsMu guards obs, what this member observed of the other members'
	// Leases (liveness on our clock).
	obsMu sync.Mutex
	obs   map[string]*observation
	// lastRenew is the start of the last successful renewal (UnixNano).
	lastRenew atomic.Int64
	// epoch is when New ran (with its monotonic clock reading); fenceAt is
	// the start of the last successful renewal as nanoseconds since epoch,
	// plus one (0: never renewed). Fence reads them.
	epoch   time.Time
	fenceAt atomic.Int64
}

// New checks opts and returns a Ring; nothing runs until Start.
func New(opts Options) (*Ring, error) {
	o, err := opts.complete()
	if err != nil {
		return nil, err
	}
	r := &Ring{
		opts:        o,
		log:         o.Logger.WithValues("ring", o.Ring, "identity", o.Identity),
		memberName:  memberLeaseName(o.Ring, o.Identity),
		incarnation: randSuffix(16),
		metrics:     metricsFor(o.Ring),
		guardFree:   make(chan struct{}, 1),
		obs:         map[string]*observation{},
		epoch:       time.Now(),
	}
	return r, nil
}

// Start runs the member until ctx ends: it creates or takes over the
// member's Lease, renews it, watches the ring's Leases, acquires and
// releases buckets, and calls the handlers. It returns nil when ctx ends
// (after releasing every bucket and deleting the member's Lease), or an
// error when the member could not renew its Lease for RenewDeadline (all
// work stopped first). Start implements manager.Runnable; NeedLeaderElection
// is false.
func (r *Ring) Start(ctx context.Context) error {
	if r == nil {
		<-ctx.Done()
		return nil
	}
	if !r.started.CompareAndSwap(false, true) {
		return fmt.Errorf("sharding: ring %q member %q: Start called twice", r.opts.Ring, r.opts.Identity)
	}
	return r.run(ctx)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: members run
// on every replica.
func (r *Ring) NeedLeaderElection() bool { return false }

// OnChange registers h; call it before Start.
func (r *Ring) OnChange(h Handler) {
	if r == nil || h == nil {
		return
	}
	r.handlersMu.Lock()
	defer r.handlersMu.Unlock()
	r.handlers = append(r.handlers, h)
}

// Bucket returns the bucket of key: the top bits of its 64-bit FNV-1a hash,
// as KEP-5866's shard selectors place it. Use it for the keys an API server
// may filter on (object.metadata.uid, object.metadata.namespace). Note
// that FNV-1a leaves the top bits of short keys that differ only in their
// last two or three characters equal ("ns1" ... "ns6" share a bucket), so
// such keys cannot be split by hash range; random UIDs spread evenly.
func Bucket(key string) int {
	return int(hash64(key) >> bucketShift)
}

// NameBucket returns the bucket of a name that no API server filters on
// (an Operator's name, a controller object's key): its FNV-1a hash mixed
// by the 64-bit finalizer of MurmurHash3 (fmix64) before taking the top
// bits, so that names such as "op-1" ... "op-30" spread over the buckets.
func NameBucket(key string) int {
	h := hash64(key)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return int(h >> bucketShift)
}

// Range returns bucket b's hash range [start, end) as KEP-5866 hex strings
// ("0x0000000000000000", ..., "0x10000000000000000" for the last end).
func Range(b int) (start, end string) {
	if b < 0 || b >= Buckets {
		panic(fmt.Sprintf("sharding: bucket %d out of [0, %d)", b, Buckets))
	}
	return rangeBound(b), rangeBound(b + 1)
}

// Selector returns the KEP-5866 shard selector of s over field
// ("object.metadata.uid" or "object.metadata.namespace"): adjacent buckets
// merged into one shardRange, ranges joined with "||"; "" for an empty set.
func Selector(s BucketSet, field string) string {
	var parts []string
	for b := 0; b < Buckets; {
		if !s.Has(b) {
			b++
			continue
		}
		e := b
		for e < Buckets && s.Has(e) {
			e++
		}
		parts = append(parts, fmt.Sprintf("shardRange(%s, '%s', '%s')", field, rangeBound(b), rangeBound(e)))
		b = e
	}
	return strings.Join(parts, " || ")
}

// Owns reports whether this member works key's bucket (Bucket) now (true
// for a nil Ring). It does not wait.
func (r *Ring) Owns(key string) bool { return r.OwnsBucket(Bucket(key)) }

// OwnsBucket reports whether this member works bucket b now (true for a
// nil Ring). It does not wait.
func (r *Ring) OwnsBucket(b int) bool {
	if r == nil {
		return true
	}
	return BucketSet(r.held.Load()).Has(b)
}

// Acquire is Owns with a guard: when key's bucket is worked here and the
// member holds its fence (Fence) it returns a release function and true,
// and the bucket is not released (handlers not called, holder not cleared)
// until every such function was called. Hold it across the writes of one
// reconcile, and write through FenceWrites: the fence may lapse while the
// guard is out. A nil Ring returns a no-op and true.
func (r *Ring) Acquire(key string) (release func(), ok bool) { return r.AcquireBucket(Bucket(key)) }

// AcquireBucket is Acquire of bucket b (e.g. NameBucket of a name).
func (r *Ring) AcquireBucket(b int) (release func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	if r.Fence() != nil {
		return func() {}, false
	}
	r.guardMu.Lock()
	if !BucketSet(r.held.Load()).Has(b) {
		r.guardMu.Unlock()
		return func() {}, false
	}
	r.guards[b]++
	r.guardMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.guardMu.Lock()
			r.guards[b]--
			free := r.guards[b] == 0
			r.guardMu.Unlock()
			if free {
				select {
				case r.guardFree <- struct{}{}:
				default:
				}
			}
		})
	}, true
}

// Held returns the buckets this member works now.
func (r *Ring) Held() BucketSet {
	if r == nil {
		return AllBuckets
	}
	return BucketSet(r.held.Load())
}

// Identity returns this member's identity.
func (r *Ring) Identity() string {
	if r == nil {
		return ""
	}
	return r.opts.Identity
}

// Members returns the ring's members as last seen, sorted by identity.
func (r *Ring) Members() []Member {
	if r == nil {
		return nil
	}
	return r.members(time.Now())
}
