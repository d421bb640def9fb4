package sharding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/dcontroller/dcontroller/internal/testcontrolplane"
)

// restConfig reaches the test's kube-apiserver (envtest, started once).
var restConfig *rest.Config

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	if os.Getenv(stoppableMemberEnv) != "" {
		return runStoppableMember()
	}
	return testcontrolplane.Run(m, "sharding", &restConfig)
}

// Short durations for the tests, in the ratios of the defaults.
const (
	testLease = 3 * time.Second
	testRenew = 2 * time.Second
	testRetry = 300 * time.Millisecond
)

// cluster runs several members of one ring in a namespace of its own and
// checks fencing throughout: a shared map bucket → holder is kept by the
// members' handlers (an acquire that finds another holder fails the test),
// and a sampler compares the Held sets of the running members every 20ms.
type cluster struct {
	t  *testing.T
	ns string
	cs kubernetes.Interface

	mu      sync.Mutex
	holder  map[int]string
	members map[string]*member
	// acquiredAt: when each member last acquired each bucket.
	acquiredAt map[string]map[int]time.Time

	stopSampler context.CancelFunc
	samplerDone chan struct{}
	// releaseDelay makes every member's handler take this long to release
	// (an Operator whose controllers take time to stop).
	releaseDelay time.Duration
	// maxPeerLease is the members' Options.MaxPeerLeaseDuration.
	maxPeerLease time.Duration
}

type member struct {
	ring     *Ring
	cancel   context.CancelFunc
	done     chan error
	down     *atomic.Bool // the client refuses every request while set
	released BucketSet    // all buckets its handlers were told to release
	recorder *events.FakeRecorder
}

func newCluster(t *testing.T) *cluster {
	cs := kubernetes.NewForConfigOrDie(restConfig)
	ns := fmt.Sprintf("ring-%s", randSuffix(6))
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &cluster{t: t, ns: ns, cs: cs, holder: map[int]string{}, members: map[string]*member{},
		acquiredAt: map[string]map[int]time.Time{}, stopSampler: cancel, samplerDone: make(chan struct{})}
	go c.sample(ctx)
	t.Cleanup(func() {
		for id := range c.running() {
			c.stop(id)
		}
		c.stopSampler()
		<-c.samplerDone
	})
	return c
}

// sample fails the test when two running members hold one bucket at once.
func (c *cluster) sample(ctx context.Context) {
	defer close(c.samplerDone)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var seen BucketSet
		for id, m := range c.running() {
			h := m.ring.Held()
			if both := seen & h; both != 0 {
				c.t.Errorf("buckets %s held by %s and another member at once", both, id)
			}
			seen |= h
		}
	}
}

func (c *cluster) running() map[string]*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*member{}
	for id, m := range c.members {
		out[id] = m
	}
	return out
}

// start runs member id.
func (c *cluster) start(id string) *member { return c.startAs(id, id) }

// startAs starts a member known to the test as id whose ring identity is
// identity.
func (c *cluster) startAs(id, identity string) *member {
	c.t.Helper()
	down := &atomic.Bool{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if down.Load() {
				return nil, errors.New("test: member cut off from the API server")
			}
			return rt.RoundTrip(req)
		})
	}
	rec := events.NewFakeRecorder(1000)
	r, err := New(Options{
		Client: kubernetes.NewForConfigOrDie(cfg), Namespace: c.ns, Ring: "test", Identity: identity,
		Address: id + ".example:8443", Stats: func() map[string]int64 { return map[string]int64{"objects": 7} },
		Recorder:      rec,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, MaxPeerLeaseDuration: c.maxPeerLease,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	m := &member{ring: r, done: make(chan error, 1), down: down, recorder: rec}
	r.OnChange(func(acquired, released BucketSet) {
		if released != 0 {
			time.Sleep(c.releaseDelay)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		now := time.Now()
		for _, b := range released.List() {
			if c.holder[b] != id {
				c.t.Errorf("%s released bucket %d held by %q", id, b, c.holder[b])
			}
			delete(c.holder, b)
		}
		m.released |= released
		for _, b := range acquired.List() {
			if h, ok := c.holder[b]; ok {
				c.t.Errorf("%s acquired bucket %d still held by %s", id, b, h)
			}
			c.holder[b] = id
			if c.acquiredAt[id] == nil {
				c.acquiredAt[id] = map[int]time.Time{}
			}
			c.acquiredAt[id][b] = now
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	c.mu.Lock()
	c.members[id] = m
	c.mu.Unlock()
	go func() { m.done <- r.Start(ctx) }()
	return m
}

// stop cancels member id and returns what Start returned.
func (c *cluster) stop(id string) error {
	c.mu.Lock()
	m := c.members[id]
	c.mu.Unlock()
	m.cancel()
	err := c.wait(id)
	return err
}

// wait waits for member id's Start to return, then forgets the member.
func (c *cluster) wait(id string) error {
	c.mu.Lock()
	m := c.members[id]
	c.mu.Unlock()
	var err error
	select {
	case err = <-m.done:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("%s: Start did not return", id)
	}
	c.mu.Lock()
	delete(c.members, id)
	c.mu.Unlock()
	return err
}

// converged waits until the running members hold every bucket, each an
// even share, as their Held sets and the handlers' map agree; it returns
// how long that took.
func (c *cluster) converged(within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < within {
		last = ""
		run := c.running()
		n := len(run)
		var union BucketSet
		ok := true
		for id, m := range run {
			h := m.ring.Held()
			union |= h
			if h.Count() < Buckets/n || h.Count() > (Buckets+n-1)/n {
				ok = false
			}
			c.mu.Lock()
			for _, b := range h.List() {
				if c.holder[b] != id {
					ok = false
				}
			}
			c.mu.Unlock()
			last += fmt.Sprintf("%s:%d ", id, h.Count())
		}
		if ok && union == AllBuckets {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("members did not converge within %s: %s", within, last)
	return 0
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRingHandover: three members split the buckets; a fourth joins and
// buckets move without ever being held twice; a member that stops hands
// its buckets over at once.
func TestRingHandover(t *testing.T) {
	c := newCluster(t)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id)
	}
	c.converged(15 * time.Second)

	// Members() reads a's informer cache of the Leases, which may trail
	// the API server that converged read by a moment.
	var ms []Member
	var held BucketSet
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ms, held = c.running()["a"].ring.Members(), 0
		for _, m := range ms {
			held |= m.Held
		}
		if (len(ms) == 3 && held == AllBuckets) || time.Now().After(deadline) {
			break
		}
	}
	if len(ms) != 3 {
		t.Fatalf("Members() = %+v, want 3", ms)
	}
	for _, m := range ms {
		if m.Address != m.Identity+".example:8443" || m.Stats["objects"] != 7 || m.RenewTime.IsZero() {
			t.Errorf("member %+v: address, stats or renew time not published", m)
		}
	}
	if held != AllBuckets {
		t.Errorf("Members() holds %s, want all buckets", held)
	}

	c.start("d")
	c.converged(10 * time.Second)

	took := func() time.Duration {
		if err := c.stop("c"); err != nil {
			t.Errorf("c: Start returned %v after ctx end, want nil", err)
		}
		return c.converged(testLease)
	}()
	if took >= testLease/2 {
		t.Errorf("the buckets of a member that stopped took %s to move, want well under the lease duration %s", took, testLease)
	}
	if _, err := c.cs.CoordinationV1().Leases(c.ns).Get(context.Background(), "test-member-c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the member lease of c after it stopped: %v, want NotFound", err)
	}
	for b := range Buckets {
		le, err := c.cs.CoordinationV1().Leases(c.ns).Get(context.Background(), bucketLeaseName("test", b), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start, end := Range(b)
		if le.Annotations[AnnotationRange] != start+"-"+end || le.Labels[LabelRole] != "bucket" {
			t.Errorf("bucket lease %s: annotations %v labels %v", le.Name, le.Annotations, le.Labels)
		}
		if h := ptr.Deref(le.Spec.HolderIdentity, ""); h == "c" || h == "" {
			t.Errorf("bucket %d: holder %q after c stopped", b, h)
		}
	}
}

// TestRingMemberDies: a member cut off from the API server stops all work
// after RenewDeadline and Start returns an error; the others take its
// buckets after its Lease expired on their clock, never before.
func TestRingMemberDies(t *testing.T) {
	c := newCluster(t)
	c.start("a")
	b := c.start("b")
	c.converged(15 * time.Second)
	bHeld := b.ring.Held()
	// Count only what b releases from here: when b started first it took
	// every bucket and released half of them to a already.
	c.mu.Lock()
	b.released = 0
	c.mu.Unlock()

	cut := time.Now()
	b.down.Store(true)
	err := c.wait("b")
	returned := time.Since(cut)
	if err == nil || !errors.Is(err, errLost) {
		t.Errorf("b: Start returned %v, want the lost member lease error", err)
	}
	if returned > testRenew+testRetry || returned < testRenew-testRetry {
		t.Errorf("b stopped %s after it was cut off, want about the renew deadline %s", returned, testRenew)
	}
	c.mu.Lock()
	bReleased := b.released
	c.mu.Unlock()
	if bReleased != bHeld || b.ring.Held() != 0 {
		t.Errorf("b: handlers released %s, Held() = %s; want %s released and nothing held", bReleased, b.ring.Held(), bHeld)
	}

	c.converged(2 * testLease)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, bk := range bHeld.List() {
		at := c.acquiredAt["a"][bk]
		if d := at.Sub(cut); d < testLease-testRetry {
			t.Errorf("a took bucket %d %s after b was cut off, before b's lease could expire (%s)", bk, d, testLease)
		}
	}
}

// TestRingGuard: a guard taken with Acquire holds the release of its
// bucket (and of the batch it is released with) until it is given back.
func TestRingGuard(t *testing.T) {
	c := newCluster(t)
	a := c.start("a")
	c.converged(10 * time.Second)
	// a key whose bucket moves to b when b joins, so the guard matters
	var all [Buckets]string
	for i := range all {
		all[i] = "a"
	}
	a2 := Rebalance([]string{"a", "b"}, all)
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("uid-%d", i); a2[Bucket(k)] == "b" {
			key = k
		}
	}
	bk := Bucket(key)
	release, ok := a.ring.Acquire(key)
	if !ok {
		t.Fatalf("Acquire(%q): a alone does not own it", key)
	}
	b := c.start("b")

	// a stops working bucket bk at once, but b may not take it while the
	// guard is out: the bucket Lease still names a.
	deadline := time.Now().Add(10 * time.Second)
	for a.ring.Held().Has(bk) {
		if time.Now().After(deadline) {
			t.Fatal("a never started to release")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r2, ok := a.ring.Acquire(key); ok || a.ring.Owns(key) {
		r2()
		t.Error("Acquire or Owns succeeded on a draining bucket")
	}
	for range 5 * int(testRetry/(100*time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
		le, err := c.cs.CoordinationV1().Leases(c.ns).Get(context.Background(), bucketLeaseName("test", bk), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(le.Spec.HolderIdentity, ""); h != "a" || b.ring.Held().Has(bk) {
			t.Fatalf("bucket %d: holder %q, b holds it: %v, while a's guard is out", bk, h, b.ring.Held().Has(bk))
		}
	}
	release()
	c.converged(5 * time.Second)
	if !b.ring.Held().Has(bk) {
		t.Errorf("b does not hold bucket %d after the guard was given back", bk)
	}

	var reasons []string
	for len(a.recorder.Events) > 0 {
		reasons = append(reasons, <-a.recorder.Events)
	}
	want := []string{"Normal BucketsAcquired acquired buckets 0-63", "Normal BucketsReleased released buckets " + AssignedTo(a2, "b").String()}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("events of a: %q, want %q", reasons, want)
	}
}

// TestRingSlowHandler: a handler that takes longer than the renew deadline
// to stop its work does not cost the member its Lease: the ring renews
// while handlers run.
func TestRingSlowHandler(t *testing.T) {
	c := newCluster(t)
	c.releaseDelay = 2 * testRenew
	a := c.start("a")
	c.converged(10 * time.Second)
	c.start("b")
	c.converged(4*testRenew + 10*time.Second)
	select {
	case err := <-a.done:
		t.Fatalf("a stopped while its handler released buckets: %v", err)
	default:
	}
	if n := a.ring.Held().Count(); n != Buckets/2 {
		t.Errorf("a holds %d buckets, want %d", n, Buckets/2)
	}
}

// TestRingDuplicateIdentity: a second process started with the identity of
// a live member works nothing while that member renews its Lease, and
// takes over once it left.
func TestRingDuplicateIdentity(t *testing.T) {
	c := newCluster(t)
	c.start("a")
	c.converged(10 * time.Second)
	dup := c.startAs("a-again", "a")
	deadline := time.Now().Add(2 * testLease)
	for time.Now().Before(deadline) {
		if n := dup.ring.Held().Count(); n != 0 {
			t.Fatalf("the second process with identity a works %d buckets while the first one lives", n)
		}
		select {
		case err := <-dup.done:
			t.Fatalf("the second process stopped: %v", err)
		default:
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := c.stop("a"); err != nil {
		t.Fatalf("a: %v", err)
	}
	c.converged(3 * testLease)
	if n := dup.ring.Held().Count(); n != Buckets {
		t.Errorf("after a left, the second process works %d buckets, want %d", n, Buckets)
	}
}
