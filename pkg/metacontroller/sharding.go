package metacontroller

import (
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// Counters count a member's hook-controller work, for the member's
// published statistics (sharding.Options.Stats). The zero value is ready;
// a nil *Counters counts nothing.
type Counters struct {
	// Syncs is the number of parent syncs this member ran (parents of
	// other members are skipped before they count).
	Syncs atomic.Int64
	// parents counts the parents this member works now (set by Setup).
	parents atomic.Pointer[func() int64]
}

// Parents returns how many parents of the running controllers this member
// works now (all of them without a ring); 0 before Setup.
func (c *Counters) Parents() int64 {
	if c == nil {
		return 0
	}
	if f := c.parents.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// ownedParents counts the parents of every running controller whose UID's
// bucket this member holds.
func (r *runner) ownedParents() int64 {
	r.mu.Lock()
	var runs []*running
	for _, run := range r.running {
		runs = append(runs, run)
	}
	r.mu.Unlock()
	var n int64
	for _, run := range runs {
		if run.drainer == nil {
			continue
		}
		for _, o := range run.drainer.allParents() {
			if r.ring.Owns(string(o.GetUID())) {
				n++
			}
		}
	}
	return n
}

func (c *Counters) synced() {
	if c != nil {
		c.Syncs.Add(1)
	}
}

// controllerKey is the ring key of a CompositeController or
// DecoratorController object: its member writes the object's status and
// finalizer and records its Events; every member runs the controller for
// its own parents.
func controllerKey(key string) string { return "controller/" + key }

// resharder is a running controller that can enqueue the parents of
// buckets this member just acquired.
type resharder interface {
	enqueueBuckets(acquired sharding.BucketSet)
}

func (c *composite) enqueueBuckets(acquired sharding.BucketSet) {
	for _, o := range c.parents.index.list("", true) {
		if acquired.Has(sharding.Bucket(string(o.GetUID()))) {
			c.enqueueForced(c.keyOf(o))
		}
	}
}

func (c *decorator) enqueueBuckets(acquired sharding.BucketSet) {
	for _, dr := range c.resources {
		for _, o := range dr.w.index.list("", true) {
			if acquired.Has(sharding.Bucket(string(o.GetUID()))) {
				c.enqueueForced(parentKey{gvk: dr.gvk, NamespacedName: keyOf(o)})
			}
		}
	}
}

// onReshard is the runner's sharding.Handler. Released buckets need
// nothing more: their syncs hold the ring's guard, so none writes once the
// handler is called. For acquired buckets, every running controller
// enqueues the parents that fall in them (controller objects are looked at
// again by their reconcilers within ownerRecheck).
func (r *runner) onReshard(acquired, _ sharding.BucketSet) {
	if acquired == 0 {
		return
	}
	r.mu.Lock()
	var rs []resharder
	for _, run := range r.running {
		if h, ok := run.drainer.(resharder); ok {
			rs = append(rs, h)
		}
	}
	r.mu.Unlock()
	for _, h := range rs {
		h.enqueueBuckets(acquired)
	}
}

// ownerRecheck is how often a member that runs a controller object of
// another member looks whether it became the object's member.
const ownerRecheck = 5 * time.Second

// reconcileNotOwned runs a controller object whose key is another ring
// member's: this member runs the controller for its own parents and writes
// nothing to the object. When the object is being deleted, the controller
// drains this member's parents (the object's member removes
// ControllerFinalizer once no parent carries the parent finalizer any
// more). A controller with a finalize hook starts only once the object
// carries ControllerFinalizer (its member adds it first), so that no parent
// gets the parent finalizer before.
func (r *runner) reconcileNotOwned(t cleanupTarget) reconcile.Result {
	recheck := reconcile.Result{RequeueAfter: ownerRecheck}
	if t.obj.GetDeletionTimestamp() != nil {
		if !controllerutil.ContainsFinalizer(t.obj, ControllerFinalizer) {
			r.stopKey(t.key)
			return reconcile.Result{}
		}
		d := r.drainerOf(t.key)
		if d == nil {
			run, err := t.start()
			if err != nil {
				// Its member releases the parents without a finalize call.
				return recheck
			}
			r.mu.Lock()
			r.running[t.key] = run
			r.mu.Unlock()
			d = run.drainer
		}
		d.drain()
		return reconcile.Result{RequeueAfter: min(cleanupPoll, ownerRecheck)}
	}
	if t.hasFinalize && !controllerutil.ContainsFinalizer(t.obj, ControllerFinalizer) {
		return reconcile.Result{RequeueAfter: time.Second}
	}
	if _, err := r.upsert(t.key, stamp(t.obj), t.start); err != nil {
		// The object's member reports it in the status and Events.
		r.log.V(1).Info("controller not started; retrying", "controller", t.key, "error", err.Error())
	}
	return recheck
}
