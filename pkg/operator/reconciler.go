package operator

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	eventnote "github.com/dcontroller/dcontroller/internal/events"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// StatusInterval is how often the status of a running operator is refreshed
// (a write is made only when it changed).
const StatusInterval = 5 * time.Second

// StartingStatusDelay is how long a reconcile waits for an operator's
// start (Runtime.Upsert) to end. A start that takes longer (the informer
// of a source has not synced yet) goes on in the background: the reconcile
// writes the status so far, with the controllers still starting as
// Ready=False reason Starting, and returns, so that its worker reconciles
// other Operators; the end of the start queues another reconcile, which
// records the Started events and writes the status.
const StartingStatusDelay = time.Second

// DefaultWorkers is the Reconciler's default Workers.
const DefaultWorkers = 4

// Reconciler runs the Operator objects of a cluster on a Runtime: a new or
// changed Operator (new generation) is (re)started, a deleted one stopped
// with its views dropped, and each Operator's status is kept up to date.
type Reconciler struct {
	Client  client.Client
	Runtime *Runtime
	Logger  logr.Logger
	// Recorder, when set, receives Kubernetes Events on the Operator: Started
	// when it (re)starts, InvalidController for a controller that failed to
	// start (one that runs with a condition such as OwnerConflict is not),
	// ControllerError for each new controller error, OwnerConflict and
	// TargetContested when a controller's Ready condition turns to that
	// reason or names another object.
	Recorder events.EventRecorder
	// Ring, when set, is this manager's share of the work in a ring of
	// active replicas (dctl start --sharding): an Operator runs on the
	// member whose buckets hold its name, and only that member writes its
	// status. nil: every Operator runs here.
	Ring *sharding.Ring
	// Workers is how many Operators are reconciled at once (the
	// controller's MaxConcurrentReconciles; one Operator is never
	// reconciled twice at once). A reconcile waits at most
	// StartingStatusDelay for a start. 0: DefaultWorkers.
	Workers int
	// pending holds the operators whose start ended in the background
	// (see StartingStatusDelay) and whose Started events are not recorded
	// yet, by name.
	pmu     sync.Mutex
	pending map[string]pendingStart
	// ctx is the manager's context; operators live as long as it does.
	ctx context.Context
	// kicks carries the Operators to reconcile after this member acquired
	// their buckets.
	kicks chan event.GenericEvent
}

// SetupWithManager registers the reconciler with a controller-runtime manager.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.ctx = ctx
	r.kicks = make(chan event.GenericEvent, 1024)
	r.Ring.OnChange(r.onReshard)
	return ctrl.NewControllerManagedBy(mgr).
		Named("operator").
		For(&opv1a1.Operator{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.kicks, &handler.EnqueueRequestForObject{})).
		// Tests and restarts build several managers in one process.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: r.workers()}).
		Complete(r)
}

func (r *Reconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return DefaultWorkers
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The member holding the bucket of the name runs the operator and
	// writes its status; a namespace-sharded one runs on every member.
	release, ours := r.Ring.AcquireBucket(sharding.NameBucket(req.Name))
	defer release()
	op := &opv1a1.Operator{}
	if err := r.Client.Get(ctx, req.NamespacedName, op); err != nil {
		if apierrors.IsNotFound(err) {
			r.stop(&opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}, true, "operator deleted: controllers stopped, views dropped")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !op.DeletionTimestamp.IsZero() {
		r.stop(op, true, "operator being deleted: controllers stopped, views dropped")
		return ctrl.Result{}, nil
	}
	byNamespace := r.Ring != nil && op.Spec.Sharding == opv1a1.ShardByNamespace
	if !ours && !byNamespace {
		// Another member of the ring runs it (stopped here when this
		// member released its bucket, or now if its sharding changed).
		r.stop(op, false, "operator runs on another member of the ring: controllers stopped, views dropped here")
		return ctrl.Result{}, nil
	}
	runCtx := r.ctx
	if runCtx == nil {
		runCtx = ctx
	}
	_, wasRunning := r.Runtime.Status(op.Name, op.Generation)
	started := r.upsert(runCtx, op, wasRunning)
	if !started {
		if p, ok := r.takePending(op.Name, op.Generation); ok {
			started, wasRunning = true, p.replaced
		}
	}
	if started && wasRunning && r.Recorder != nil {
		r.Recorder.Eventf(op, nil, corev1.EventTypeNormal, "Stopped", "Stop", "controllers of the previous generation stopped for generation %d", op.Generation)
	}
	if !ours {
		// A namespace-sharded operator's status is written by the member
		// of its name.
		return ctrl.Result{}, nil
	}
	if started && r.Recorder != nil {
		st, _ := r.Runtime.Status(op.Name, op.Generation)
		runs, _ := r.Runtime.Running(op.Name)
		running := 0
		for _, cs := range st.Controllers {
			// A controller that runs counts as running whatever its Ready
			// condition (an owner conflict, a failing write); only one that
			// failed to start is an invalid controller.
			if runs[cs.Name] {
				running++
			} else if c := meta.FindStatusCondition(cs.Conditions, "Ready"); c != nil && c.Reason != ReasonStarting {
				// (Still Starting: the operator was stopped while it
				// started; it is not an invalid controller.)
				r.Recorder.Eventf(op, nil, corev1.EventTypeWarning, "InvalidController", "Start", "%s", eventnote.Note("controller %s: %s", cs.Name, c.Message))
			}
		}
		r.Recorder.Eventf(op, nil, corev1.EventTypeNormal, "Started", "Start", "operator started with %d of %d controllers running (generation %d)", running, len(st.Controllers), op.Generation)
	}
	if err := r.updateStatus(ctx, op); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: StatusInterval}, nil
}

// upsert runs Runtime.Upsert(runCtx, op) and returns its answer when it
// comes within StartingStatusDelay. Otherwise it returns false and lets
// the start go on in the background: when it ends, a start is recorded in
// pending (with wasRunning, for the Stopped event) and the Operator is
// queued for another reconcile. A Delete or another generation of the
// Operator meanwhile cancels the start (Runtime.Delete, Runtime.Upsert).
func (r *Reconciler) upsert(runCtx context.Context, op *opv1a1.Operator, wasRunning bool) (started bool) {
	done := make(chan bool, 1)
	go func() { done <- r.Runtime.Upsert(runCtx, op) }()
	select {
	case started := <-done:
		return started
	case <-time.After(StartingStatusDelay):
	}
	go func() {
		if <-done {
			r.pmu.Lock()
			if r.pending == nil {
				r.pending = map[string]pendingStart{}
			}
			r.pending[op.Name] = pendingStart{generation: op.Generation, replaced: wasRunning}
			r.pmu.Unlock()
		}
		if r.kicks != nil {
			select {
			case r.kicks <- event.GenericEvent{Object: &opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: op.Name}}}:
			case <-runCtx.Done(): // the manager stopped: nobody reads kicks
			}
		}
	}()
	return false
}

// pendingStart is a start of an operator's generation that ended in the
// background; replaced says whether it replaced a running generation.
type pendingStart struct {
	generation int64
	replaced   bool
}

// takePending removes and returns the start of generation of the named
// operator that ended in the background, if any (one of another
// generation is dropped).
func (r *Reconciler) takePending(name string, generation int64) (pendingStart, bool) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	p, ok := r.pending[name]
	delete(r.pending, name)
	return p, ok && p.generation == generation
}

// stop stops a running operator and records a Stopped event on it;
// deleted says the Operator was
// deleted (its Orphan targets then remove their marks, see
// Runtime.Deleted), not handed to another member of the ring.
func (r *Reconciler) stop(op *opv1a1.Operator, deleted bool, msg string) {
	if _, running := r.Runtime.Status(op.Name, 0); !running {
		return
	}
	if deleted {
		r.Runtime.Deleted(op.Name)
	} else {
		r.Runtime.Delete(op.Name)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(op, nil, corev1.EventTypeNormal, "Stopped", "Stop", "%s", msg)
	}
}

// mergeConditions returns the conditions prev (as last written) updated
// with cur (as the runtime reports them now), a new slice: a condition
// whose status is unchanged keeps its lastTransitionTime; one whose status
// flips gets now (truncated to the second, as the API server stores it),
// not the time cur carries, which is that of the controller's start (API
// conventions: lastTransitionTime is when the condition last changed from
// one status to another); a new one keeps cur's.
func mergeConditions(prev, cur []metav1.Condition, now time.Time) []metav1.Condition {
	// A copy: SetStatusCondition changes conditions in place, and the
	// caller's must stay as read, to compare with and to announce changes.
	conds := append([]metav1.Condition(nil), prev...)
	for _, c := range cur {
		if p := meta.FindStatusCondition(conds, c.Type); p != nil && p.Status != c.Status {
			c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
		}
		meta.SetStatusCondition(&conds, c)
	}
	return conds
}

func (r *Reconciler) updateStatus(ctx context.Context, op *opv1a1.Operator) error {
	st, ok := r.Runtime.Status(op.Name, op.Generation)
	if !ok {
		return nil
	}
	next := op.DeepCopy()
	old := map[string]opv1a1.ControllerStatus{}
	for _, cs := range op.Status.Controllers {
		old[cs.Name] = cs
	}
	for i := range st.Controllers {
		cs := &st.Controllers[i]
		prev := old[cs.Name]
		cs.Conditions = mergeConditions(prev.Conditions, cs.Conditions, time.Now())
	}
	next.Status = st
	next.Status.Summarize()
	if equality.Semantic.DeepEqual(op.Status, next.Status) {
		return nil
	}
	if r.Recorder != nil {
		for _, cs := range st.Controllers {
			// An owner conflict or a contested target is announced once,
			// when it appears or names another object.
			if c := meta.FindStatusCondition(cs.Conditions, "Ready"); c != nil && (c.Reason == ReasonOwnerConflict || c.Reason == ReasonTargetContested) {
				if prev := meta.FindStatusCondition(old[cs.Name].Conditions, "Ready"); prev == nil || prev.Reason != c.Reason || prev.Message != c.Message {
					r.Recorder.Eventf(op, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s", eventnote.Note("controller %s: %s", cs.Name, c.Message))
				}
			}
			seen := map[string]bool{}
			for _, e := range old[cs.Name].LastErrors {
				seen[e.Time.String()+e.Message] = true
			}
			for _, e := range cs.LastErrors {
				if !seen[e.Time.String()+e.Message] {
					r.Recorder.Eventf(op, nil, corev1.EventTypeWarning, "ControllerError", "Reconcile", "%s", eventnote.Note("controller %s: %s", cs.Name, e.Message))
				}
			}
		}
	}
	return r.Client.Status().Update(ctx, next)
}

// onReshard is the Reconciler's sharding.Handler. Operators in released
// buckets stop here before the handler returns (their controllers' writes
// end with them; the next member starts them once the release is
// published); Operators in acquired buckets are reconciled, which starts
// them.
func (r *Reconciler) onReshard(acquired, released sharding.BucketSet) {
	var restart []string
	for _, name := range r.Runtime.Names() {
		switch {
		case r.Runtime.ByNamespace(name):
			// It runs over the namespaces of the held buckets: restart it
			// over the new set (the stop fences the released namespaces).
			r.Runtime.Delete(name)
			restart = append(restart, name)
		case released.Has(sharding.NameBucket(name)):
			r.stop(&opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: name}}, false, "operator handed over to another member of the ring: controllers stopped, views dropped here")
		}
	}
	for _, name := range restart {
		op := &opv1a1.Operator{ObjectMeta: metav1.ObjectMeta{Name: name}}
		go func() { r.kicks <- event.GenericEvent{Object: op} }()
	}
	if acquired == 0 {
		return
	}
	ops := &opv1a1.OperatorList{}
	if err := r.Client.List(r.ctx, ops); err != nil {
		r.Logger.Error(err, "listing Operators after acquiring buckets; they start at their next change")
		return
	}
	for i := range ops.Items {
		if acquired.Has(sharding.NameBucket(ops.Items[i].Name)) {
			op := ops.Items[i]
			// The handler must not block the ring on the work queue.
			go func() { r.kicks <- event.GenericEvent{Object: &op} }()
		}
	}
}
