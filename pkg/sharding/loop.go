package sharding

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// observation is what this member saw of another member's Lease, on this
// member's clock (client-go's leader election observes a leader the same
// way: a Lease is live while its resourceVersion changed within its
// duration, measured from when the observer saw the change).
type observation struct {
	rv       string
	seenAt   time.Time
	duration time.Duration
	// deleted: the Lease was seen and then deleted (a clean leave, or a
	// collected dead member).
	deleted bool
	// absent: never seen as a Lease, only named as a bucket's holder.
	absent bool
}

// live reports whether o counts as a live member at now.
func (o *observation) live(now time.Time) bool {
	return !o.deleted && !o.absent && now.Sub(o.seenAt) < o.duration
}

// ringView is the informer's view of the ring's Leases.
type ringView struct {
	lister coordinationlisters.LeaseNamespaceLister
}

// errLost reports that the member could not renew its Lease in time.
var errLost = errors.New("lost the member lease")

// loop is the state of the ring's goroutine.
type loop struct {
	r      *Ring
	lister coordinationlisters.LeaseNamespaceLister
	synced func() bool
	// owned: buckets whose Lease names this member, being worked or
	// drained.
	owned BucketSet
	// lease: this member's Lease as last written (nil: read it again).
	lease *coordinationv1.Lease
	// lastRenew: the start of the last successful renewal; lastTry: of
	// the last attempt.
	lastRenew, lastTry time.Time
	// before[b]: the resourceVersion of bucket b's Lease this member last
	// wrote over (acquiring or clearing), "" when it created it. The
	// informer may still show that version for a moment: it is stale, not
	// a takeover.
	before [Buckets]string
	// started: the member Lease was renewed at least once by this process.
	started bool
	// taken: another process renews our member Lease now.
	taken bool
	// busyRV and busySince: the member Lease of another process with our
	// identity, and when we first saw that version (liveness on our clock).
	busyRV    string
	busySince time.Time
}

// errIdentityTaken reports that another process renews this member's
// Lease.
var errIdentityTaken = errors.New("another process renews the member lease of this identity")

func (r *Ring) run(ctx context.Context) error {
	o := r.opts
	factory := informers.NewSharedInformerFactoryWithOptions(o.Client, 0,
		informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(labels.Set{LabelRing: o.Ring}).String()
		}))
	leases := factory.Coordination().V1().Leases()
	informer := leases.Informer()
	poke := make(chan struct{}, 1)
	wake := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, time.Now()); wake() },
		UpdateFunc: func(_, obj any) { r.observe(obj, time.Now()); wake() },
		DeleteFunc: func(obj any) { r.forget(obj); wake() },
	}); err != nil {
		return fmt.Errorf("sharding: watching the Leases of ring %q: %w", o.Ring, err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	l := &loop{
		r:         r,
		lister:    leases.Lister().Leases(o.Namespace),
		synced:    informer.HasSynced,
		lastRenew: time.Now(),
	}
	r.lastRenew.Store(l.lastRenew.UnixNano())
	r.view.Store(&ringView{lister: l.lister})
	r.log.Info("joining the ring", "namespace", o.Namespace, "lease", r.memberName)

	ticker := time.NewTicker(o.RetryPeriod)
	defer ticker.Stop()
	for {
		if err := l.step(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return l.shutdown()
		case <-ticker.C:
		case <-poke:
		}
	}
}

// apiContext bounds an API call: by half the RenewDeadline, and never past
// the renew deadline, so that the loop notices a lost Lease in time.
func (l *loop) apiContext() (context.Context, context.CancelFunc) {
	d := time.Now().Add(l.r.opts.RenewDeadline / 2)
	if dl := l.lastRenew.Add(l.r.opts.RenewDeadline); dl.Before(d) {
		d = dl
	}
	return context.WithDeadline(context.Background(), d)
}

// step renews the member's Lease when due, then releases and acquires
// buckets toward the assignment over the live members.
func (l *loop) step() error {
	r := l.r
	now := time.Now()
	if l.lease == nil || now.Sub(l.lastTry) >= r.opts.RetryPeriod {
		l.renew()
	}
	if l.taken {
		lerr := l.lost()
		return fmt.Errorf("sharding: ring %q member %q: %w (two replicas with the same --sharding-identity?); stopped all work: %v",
			r.opts.Ring, r.opts.Identity, errIdentityTaken, lerr)
	}
	if time.Since(l.lastRenew) > r.opts.RenewDeadline {
		return l.lost()
	}
	if l.lease == nil || !l.synced() {
		return nil
	}
	now = time.Now()
	var buckets [Buckets]*coordinationv1.Lease
	all, _ := l.lister.List(labels.SelectorFromSet(labels.Set{LabelRole: roleBucket}))
	for _, le := range all {
		if b, ok := bucketOf(r.opts.Ring, le.Name); ok {
			buckets[b] = le
		}
	}
	live := r.liveMembers(now)
	r.metrics.members.Set(float64(len(live)))
	var holders [Buckets]string
	for b, le := range buckets {
		holders[b] = holderOf(le)
		if l.owned.Has(b) {
			holders[b] = r.opts.Identity
		}
	}
	mine := AssignedTo(Rebalance(live, holders), r.opts.Identity)

	// Buckets whose Lease names another holder were taken from us: stop at
	// once, nothing to clear.
	var fenced BucketSet
	for _, b := range l.owned.List() {
		if le := buckets[b]; le != nil && holderOf(le) != r.opts.Identity && le.ResourceVersion != l.before[b] {
			fenced |= 1 << uint(b)
		}
	}
	if fenced != 0 {
		r.log.Error(nil, "buckets were taken over while this member held them", "buckets", fenced.String())
	}
	if rel := (l.owned &^ mine) | fenced; rel != 0 {
		if err := l.release(rel, fenced); err != nil {
			return err
		}
	}
	// Leases that still name this member though it does not work the
	// bucket (a clear that failed, an earlier run): clear them.
	for b, le := range buckets {
		if le != nil && holderOf(le) == r.opts.Identity && !l.owned.Has(b) && !mine.Has(b) && le.ResourceVersion != l.before[b] {
			l.clearHolder(b, le)
		}
	}

	var acquired BucketSet
	for _, b := range (mine &^ l.owned).List() {
		if l.tryAcquire(b, buckets[b], now) {
			acquired |= 1 << uint(b)
		}
	}
	if acquired != 0 {
		l.owned |= acquired
		r.guardMu.Lock()
		r.held.Store(r.held.Load() | uint64(acquired))
		r.guardMu.Unlock()
		r.metrics.held.Set(float64(r.Held().Count()))
		r.metrics.acquired.Add(float64(acquired.Count()))
		r.log.Info("acquired buckets", "buckets", acquired.String(), "held", l.owned.Count())
		l.event("BucketsAcquired", "Acquire", "acquired buckets %s", acquired)
		if err := l.callRenewing(acquired, 0); err != nil {
			return err
		}
	}
	l.collect(now)
	return nil
}

// renew writes the member's Lease (creating or taking it over when
// needed). A failure leaves lastRenew as it was.
func (l *loop) renew() {
	r := l.r
	start := time.Now()
	l.lastTry = start
	if l.started && start.Sub(l.lastRenew) > r.opts.RenewDeadline {
		// Past the renew deadline (the process was stopped, or every
		// attempt failed): the others may have taken the buckets already,
		// and a renewal now would give the fence back (Fence) to a sync
		// that began before. The caller gives all work up instead (lost).
		return
	}
	ctx, cancel := l.apiContext()
	defer cancel()
	leases := r.opts.Client.CoordinationV1().Leases(r.opts.Namespace)
	if l.lease == nil {
		cur, err := leases.Get(ctx, r.memberName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, l.memberLease(nil, start), metav1.CreateOptions{})
			if err != nil {
				l.renewFailed(err)
				return
			}
			l.renewed(created, start)
			return
		case err != nil:
			l.renewFailed(err)
			return
		}
		if inc := cur.Annotations[AnnotationIncarnation]; inc != "" && inc != r.incarnation {
			if cur.ResourceVersion != l.busyRV {
				l.busyRV, l.busySince = cur.ResourceVersion, start
			}
			if start.Sub(l.busySince) < r.opts.LeaseDuration {
				if l.started {
					l.taken = true
					return
				}
				// Joining: wait for the other process's Lease to expire
				// without counting it as a failed renewal.
				l.lastRenew = start
				if l.busySince == start {
					r.log.Info("another process renews this identity's member Lease; waiting until it stops renewing it for the lease duration",
						"lease", r.memberName, "leaseDuration", r.opts.LeaseDuration.String())
				}
				return
			}
		}
		l.lease = cur
	}
	updated, err := leases.Update(ctx, l.memberLease(l.lease, start), metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			l.lease = nil
		}
		l.renewFailed(err)
		return
	}
	l.renewed(updated, start)
}

func (l *loop) renewed(le *coordinationv1.Lease, start time.Time) {
	l.started = true
	l.lease = le
	l.lastRenew = start
	l.r.lastRenew.Store(start.UnixNano())
	l.r.fenced(start)
}

func (l *loop) renewFailed(err error) {
	l.r.metrics.renewFailure.Inc()
	l.r.log.Error(err, "renewing the member lease", "lease", l.r.memberName, "lastRenew", l.lastRenew)
}

// memberLease returns the member's Lease renewed at now: cur updated, or a
// new one when cur is nil.
func (l *loop) memberLease(cur *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	r := l.r
	le := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: r.memberName, Namespace: r.opts.Namespace}}
	if cur != nil {
		le = cur.DeepCopy()
	}
	if le.Labels == nil {
		le.Labels = map[string]string{}
	}
	le.Labels[LabelRing] = r.opts.Ring
	le.Labels[LabelRole] = roleMember
	if le.Annotations == nil {
		le.Annotations = map[string]string{}
	}
	le.Annotations[AnnotationIncarnation] = r.incarnation
	if r.opts.Address != "" {
		le.Annotations[AnnotationAddress] = r.opts.Address
	} else {
		delete(le.Annotations, AnnotationAddress)
	}
	if r.opts.Stats != nil {
		if js, err := json.Marshal(r.opts.Stats()); err == nil {
			le.Annotations[AnnotationStats] = string(js)
		}
	}
	t := metav1.NewMicroTime(now)
	if le.Spec.HolderIdentity == nil || *le.Spec.HolderIdentity != r.opts.Identity || le.Spec.AcquireTime == nil {
		le.Spec.AcquireTime = &t
	}
	le.Spec.HolderIdentity = ptr.To(r.opts.Identity)
	le.Spec.LeaseDurationSeconds = ptr.To(int32((r.opts.LeaseDuration + time.Second - 1) / time.Second))
	le.Spec.RenewTime = &t
	return le
}

// tryAcquire writes this member into bucket b's Lease le (nil: create it)
// when le is free; it reports whether b is now this member's.
func (l *loop) tryAcquire(b int, le *coordinationv1.Lease, now time.Time) bool {
	r := l.r
	ctx, cancel := l.apiContext()
	defer cancel()
	leases := r.opts.Client.CoordinationV1().Leases(r.opts.Namespace)
	t := metav1.NewMicroTime(now)
	if le == nil {
		start, end := Range(b)
		le = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:        bucketLeaseName(r.opts.Ring, b),
				Namespace:   r.opts.Namespace,
				Labels:      map[string]string{LabelRing: r.opts.Ring, LabelRole: roleBucket},
				Annotations: map[string]string{AnnotationRange: start + "-" + end},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(r.opts.Identity),
				AcquireTime:    &t,
				RenewTime:      &t,
			},
		}
		l.before[b] = ""
		if _, err := leases.Create(ctx, le, metav1.CreateOptions{}); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				r.log.Error(err, "creating a bucket lease", "bucket", b)
			}
			return false
		}
		return true
	}
	holder := holderOf(le)
	if !r.holderFree(holder, now) {
		return false
	}
	if holder != "" && holder != r.opts.Identity {
		r.log.Info("taking over a bucket from a member that is not live", "bucket", b, "holder", holder)
	}
	next := le.DeepCopy()
	if holder != r.opts.Identity {
		next.Spec.AcquireTime = &t
		next.Spec.LeaseTransitions = ptr.To(ptr.Deref(le.Spec.LeaseTransitions, 0) + 1)
	}
	next.Spec.HolderIdentity = ptr.To(r.opts.Identity)
	next.Spec.RenewTime = &t
	if _, err := leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) {
			r.log.Error(err, "acquiring a bucket lease", "bucket", b)
		}
		return false
	}
	l.before[b] = le.ResourceVersion
	return true
}

// release stops working the buckets of set: no new guards, wait for the
// guards out, handlers, then clear the holder of each bucket not in
// fenced. It returns an error only when the member Lease was lost while
// waiting.
func (l *loop) release(set, fenced BucketSet) error {
	r := l.r
	r.guardMu.Lock()
	r.held.Store(r.held.Load() &^ uint64(set))
	r.guardMu.Unlock()
	r.metrics.held.Set(float64(r.Held().Count()))
	if err := l.waitGuards(set); err != nil {
		return err
	}
	if err := l.callRenewing(0, set); err != nil {
		return err
	}
	l.owned &^= set
	r.metrics.released.Add(float64(set.Count()))
	r.log.Info("released buckets", "buckets", set.String(), "held", l.owned.Count())
	l.event("BucketsReleased", "Release", "released buckets %s", set)
	for _, b := range (set &^ fenced).List() {
		le, err := l.lister.Get(bucketLeaseName(r.opts.Ring, b))
		if err != nil {
			continue
		}
		l.clearHolder(b, le)
	}
	return nil
}

// waitGuards waits until no guard of set is out, renewing the member
// Lease meanwhile; errLost when the Lease could not be renewed in time.
func (l *loop) waitGuards(set BucketSet) error {
	r := l.r
	ticker := time.NewTicker(r.opts.RetryPeriod / 4)
	defer ticker.Stop()
	for r.guarded(set) {
		select {
		case <-r.guardFree:
		case <-ticker.C:
			if time.Since(l.lastTry) >= r.opts.RetryPeriod {
				l.renew()
			}
			if time.Since(l.lastRenew) > r.opts.RenewDeadline {
				return l.lost()
			}
		}
	}
	return nil
}

// callRenewing calls the handlers and keeps renewing the member Lease
// while they run (stopping an Operator's controllers may take a while): a
// slow handler must not cost the member its Lease. When the Lease could not
// be renewed in time, it waits for the handlers to return and gives up
// (lost).
func (l *loop) callRenewing(acquired, released BucketSet) error {
	r := l.r
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.callHandlers(acquired, released)
	}()
	ticker := time.NewTicker(r.opts.RetryPeriod / 4)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ticker.C:
			if time.Since(l.lastTry) >= r.opts.RetryPeriod {
				l.renew()
			}
			if time.Since(l.lastRenew) > r.opts.RenewDeadline {
				<-done
				if released != 0 {
					l.owned &^= released
				}
				return l.lost()
			}
		}
	}
}

// guarded reports whether a guard of a bucket of set is out.
func (r *Ring) guarded(set BucketSet) bool {
	r.guardMu.Lock()
	defer r.guardMu.Unlock()
	for _, b := range set.List() {
		if r.guards[b] > 0 {
			return true
		}
	}
	return false
}

// clearHolder sets bucket b's Lease free, if it still names this member;
// conflicts are retried with a fresh read, other errors are left for the
// next step (the Lease still names this member).
func (l *loop) clearHolder(b int, le *coordinationv1.Lease) {
	r := l.r
	ctx, cancel := l.apiContext()
	defer cancel()
	leases := r.opts.Client.CoordinationV1().Leases(r.opts.Namespace)
	for range 3 {
		if holderOf(le) != r.opts.Identity {
			return
		}
		next := le.DeepCopy()
		next.Spec.HolderIdentity = nil
		next.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
		_, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.before[b] = le.ResourceVersion
			return
		}
		if !apierrors.IsConflict(err) {
			r.log.Error(err, "clearing the holder of a bucket lease", "bucket", b)
			return
		}
		if le, err = leases.Get(ctx, next.Name, metav1.GetOptions{}); err != nil {
			return
		}
	}
}

// lost stops all work (no new guards; waits for the guards out until the
// others may take over at the earliest; handlers) and returns the error
// Start returns.
func (l *loop) lost() error {
	r := l.r
	set := l.owned
	r.guardMu.Lock()
	r.held.Store(0)
	r.guardMu.Unlock()
	r.metrics.held.Set(0)
	deadline := l.lastRenew.Add(r.opts.LeaseDuration)
	for r.guarded(set) && time.Now().Before(deadline) {
		select {
		case <-r.guardFree:
		case <-time.After(time.Until(deadline)):
		}
	}
	if r.guarded(set) {
		r.log.Error(nil, "guards still out after the member lease expired", "buckets", set.String())
	}
	if set != 0 {
		r.callHandlers(0, set)
		r.metrics.released.Add(float64(set.Count()))
	}
	l.owned = 0
	err := fmt.Errorf("sharding: ring %q member %q: %w %s/%s: not renewed for %s (last renewal %s)",
		r.opts.Ring, r.opts.Identity, errLost, r.opts.Namespace, r.memberName,
		time.Since(l.lastRenew).Round(time.Millisecond), l.lastRenew.Format(time.RFC3339Nano))
	r.log.Error(err, "stopped all work", "released", set.String())
	return err
}

// shutdown releases every bucket and deletes the member's Lease.
func (l *loop) shutdown() error {
	r := l.r
	if l.owned != 0 {
		if err := l.release(l.owned, 0); err != nil {
			return err
		}
	}
	if l.lease == nil || l.taken {
		// Not ours (never renewed, or another process with our identity
		// renews it): leave it.
		r.log.Info("left the ring")
		return nil
	}
	ctx, cancel := l.apiContext()
	defer cancel()
	// Only the version this process wrote: not a Lease another process
	// took over since.
	err := r.opts.Client.CoordinationV1().Leases(r.opts.Namespace).Delete(ctx, r.memberName,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.lease.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.log.Error(err, "deleting the member lease")
	}
	r.log.Info("left the ring")
	return nil
}

// collect deletes the Leases of members not live for 3 LeaseDurations
// (precondition: the resourceVersion observed), and forgets members gone
// that long.
func (l *loop) collect(now time.Time) {
	r := l.r
	var stale []string
	r.obsMu.Lock()
	for id, o := range r.obs {
		if now.Sub(o.seenAt) <= 3*o.duration {
			continue
		}
		if o.deleted || o.absent {
			delete(r.obs, id)
			continue
		}
		stale = append(stale, id)
	}
	r.obsMu.Unlock()
	for _, id := range stale {
		le, err := l.lister.Get(memberLeaseName(r.opts.Ring, id))
		if err != nil {
			continue
		}
		ctx, cancel := l.apiContext()
		rv := le.ResourceVersion
		err = r.opts.Client.CoordinationV1().Leases(r.opts.Namespace).Delete(ctx, le.Name,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		cancel()
		if err == nil {
			r.log.Info("deleted the lease of a dead member", "member", id)
		}
	}
}

// event records an Event on the member's Lease.
func (l *loop) event(reason, action, note string, set BucketSet) {
	if l.r.opts.Recorder == nil || l.lease == nil {
		return
	}
	l.r.opts.Recorder.Eventf(l.lease, nil, corev1.EventTypeNormal, reason, action, note, set.String())
}

// callHandlers calls the handlers in registration order.
func (r *Ring) callHandlers(acquired, released BucketSet) {
	r.handlersMu.Lock()
	hs := slices.Clone(r.handlers)
	r.handlersMu.Unlock()
	for _, h := range hs {
		h(acquired, released)
	}
}

// peerLease returns obj as the member Lease of another member of this
// ring and that member's identity, or false for any other object.
func (r *Ring) peerLease(obj any) (*coordinationv1.Lease, string, bool) {
	le, ok := obj.(*coordinationv1.Lease)
	if !ok || le.Labels[LabelRole] != roleMember {
		return nil, "", false
	}
	id, ok := memberOf(r.opts.Ring, le.Name)
	if !ok || id == r.opts.Identity {
		return nil, "", false
	}
	return le, id, true
}

// observe records a member Lease's resourceVersion change at now.
func (r *Ring) observe(obj any, now time.Time) {
	le, id, ok := r.peerLease(obj)
	if !ok {
		return
	}
	// The peer's own lease duration, capped: a Lease that claims years
	// (leaseDurationSeconds up to 2^31-1) must not park its holder's
	// buckets for that long once it stops renewing.
	d := r.opts.LeaseDuration
	if s := ptr.Deref(le.Spec.LeaseDurationSeconds, 0); s > 0 {
		d = min(time.Duration(s)*time.Second, r.opts.MaxPeerLeaseDuration)
	}
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	o := r.obs[id]
	if o == nil || o.rv != le.ResourceVersion || o.deleted || o.absent {
		r.obs[id] = &observation{rv: le.ResourceVersion, seenAt: now, duration: d}
		return
	}
	o.duration = d
}

// forget records the deletion of a member Lease.
func (r *Ring) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	le, id, ok := r.peerLease(obj)
	if !ok {
		return
	}
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	if o := r.obs[id]; o != nil {
		o.deleted = true
	} else {
		r.obs[id] = &observation{rv: le.ResourceVersion, seenAt: time.Now(), duration: r.opts.LeaseDuration, deleted: true}
	}
}

// liveMembers returns the identities of the live members at now, this
// member included, sorted.
func (r *Ring) liveMembers(now time.Time) []string {
	ids := []string{r.opts.Identity}
	r.obsMu.Lock()
	for id, o := range r.obs {
		if o.live(now) {
			ids = append(ids, id)
		}
	}
	r.obsMu.Unlock()
	slices.Sort(ids)
	return ids
}

// holderFree reports whether a bucket whose Lease names holder may be
// taken by this member at now: no holder, this member, a member whose
// Lease was deleted, or one not live on our observation (a holder never
// seen counts from now).
func (r *Ring) holderFree(holder string, now time.Time) bool {
	if holder == "" || holder == r.opts.Identity {
		return true
	}
	r.obsMu.Lock()
	defer r.obsMu.Unlock()
	o := r.obs[holder]
	switch {
	case o == nil:
		r.obs[holder] = &observation{seenAt: now, duration: r.opts.LeaseDuration, absent: true}
		return false
	case o.deleted:
		return true
	}
	return now.Sub(o.seenAt) >= o.duration
}

// members is Members at now.
func (r *Ring) members(now time.Time) []Member {
	v := r.view.Load()
	if v == nil {
		return nil
	}
	all, err := v.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	held := map[string]BucketSet{}
	for _, le := range all {
		if le.Labels[LabelRole] != roleBucket {
			continue
		}
		if b, ok := bucketOf(r.opts.Ring, le.Name); ok {
			if h := holderOf(le); h != "" {
				held[h] |= 1 << uint(b)
			}
		}
	}
	var out []Member
	for _, le := range all {
		if le.Labels[LabelRole] != roleMember {
			continue
		}
		id, ok := memberOf(r.opts.Ring, le.Name)
		if !ok {
			continue
		}
		m := Member{Identity: id, Address: le.Annotations[AnnotationAddress], Held: held[id]}
		if le.Spec.RenewTime != nil {
			m.RenewTime = le.Spec.RenewTime.Time
		}
		if js := le.Annotations[AnnotationStats]; js != "" {
			_ = json.Unmarshal([]byte(js), &m.Stats)
		}
		if id == r.opts.Identity {
			m.Live = now.Sub(time.Unix(0, r.lastRenew.Load())) <= r.opts.RenewDeadline
		} else {
			r.obsMu.Lock()
			if o := r.obs[id]; o != nil {
				m.Live = o.live(now)
			}
			r.obsMu.Unlock()
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}

// holderOf is le's holder ("" when free or le is nil).
func holderOf(le *coordinationv1.Lease) string {
	if le == nil {
		return ""
	}
	return ptr.Deref(le.Spec.HolderIdentity, "")
}

// memberOf returns the identity of a member Lease's name in ring.
func memberOf(ring, name string) (string, bool) {
	id, ok := strings.CutPrefix(name, ring+"-member-")
	return id, ok && id != ""
}

// bucketOf returns the bucket of a bucket Lease's name in ring.
func bucketOf(ring, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, ring+"-bucket-")
	if !ok || len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	b := int(s[0]-'0')*10 + int(s[1]-'0')
	return b, b < Buckets
}
