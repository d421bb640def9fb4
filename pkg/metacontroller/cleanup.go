package metacontroller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/events"
)

// ControllerFinalizer is the finalizer dcontroller puts on a
// CompositeController or DecoratorController while its spec has a finalize
// hook. When the controller object is deleted, its parents that are being
// deleted get their finalize call and every other parent loses the
// controller's parent finalizer (metacontroller.io/compositecontroller-<name>
// or metacontroller.io/decoratorcontroller-<name>) without a call; then this
// finalizer goes and the object with it. Metacontroller has no such step:
// there, the parents of a deleted controller keep its finalizer and cannot
// be deleted.
const ControllerFinalizer = "dcontroller.io/metacontroller-cleanup"

// CleanupTimeoutAnnotation, set on a CompositeController or
// DecoratorController to a Go duration ("30s", "5m"), bounds its cleanup
// once deleted, counted from its metadata.deletionTimestamp (so a restart
// of the manager does not extend it): parents still carrying the
// controller's finalizer then (a finalize hook that fails or never answers
// finalized: true) lose it without their cleanup, with a Warning Event
// FinalizeTimedOut. Default DefaultCleanupTimeout.
const CleanupTimeoutAnnotation = "dcontroller.io/cleanup-timeout"

// DefaultCleanupTimeout is the cleanup bound without CleanupTimeoutAnnotation.
const DefaultCleanupTimeout = 2 * time.Minute

// cleanupPoll is how often a deleted controller's cleanup is checked.
const cleanupPoll = time.Second

// Event reasons of the cleanup of a deleted controller.
const (
	// ReasonCleanupStarted (Normal, on the controller): deleted; the
	// cleanup of its parents started.
	ReasonCleanupStarted = "CleanupStarted"
	// ReasonCleanupDone (Normal, on the controller): no parent carries
	// its finalizer any more; the controller object goes.
	ReasonCleanupDone = "CleanupDone"
	// ReasonCleanupTimedOut (Warning, on the controller): the cleanup bound
	// passed, or the controller could not run its finalize hook; the
	// remaining parents lost the finalizer without a finalize call.
	ReasonCleanupTimedOut = "CleanupTimedOut"
	// ReasonFinalizerRemoved (Normal, on a parent): the controller is being
	// deleted and the parent is not, so its finalizer went without a
	// finalize call.
	ReasonFinalizerRemoved = "FinalizerRemoved"
	// ReasonFinalizeTimedOut (Warning, on a parent): the finalizer of a
	// deleted controller was removed without the parent's cleanup.
	ReasonFinalizeTimedOut = "FinalizeTimedOut"
)

// cleanupTimeoutOf reads CleanupTimeoutAnnotation from o (default
// DefaultCleanupTimeout); an unparsable or negative value is an error with
// the annotation's path.
func cleanupTimeoutOf(o metav1.Object) (time.Duration, error) {
	v, ok := o.GetAnnotations()[CleanupTimeoutAnnotation]
	if !ok {
		return DefaultCleanupTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return DefaultCleanupTimeout, fmt.Errorf("metadata.annotations[%q]: %q is not a duration of 0 or more (e.g. 30s, 5m)", CleanupTimeoutAnnotation, v)
	}
	return d, nil
}

// parentFinalizer is the finalizer a controller of kind
// ("CompositeController" or "DecoratorController") and name puts on its
// parents.
func parentFinalizer(kind, name string) string {
	if kind == "CompositeController" {
		return compositeFinalizerPrefix + name
	}
	return decoratorFinalizerPrefix + name
}

// note records a Normal Event on obj.
func (d *deps) note(obj runtime.Object, reason, action, format string, args ...any) {
	d.recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, action, "%s", events.Note(format, args...))
}

// released records on obj that a controller being deleted removed its
// finalizer without a finalize call.
func (d *deps) released(obj runtime.Object, kind, name string) {
	d.note(obj, ReasonFinalizerRemoved, "Cleanup",
		"the %s %s is being deleted: finalizer %s removed without a finalize call (only objects being deleted are finalized)",
		kind, name, parentFinalizer(kind, name))
}

// drainer is a running controller that can give up its parents.
type drainer interface {
	// drain switches the controller to its last work: parents being
	// deleted (or, for a DecoratorController, that stopped matching) are
	// finalized, every other parent loses the finalizer without a call,
	// and nothing is synced. It reports whether this call switched it.
	drain() bool
	// pending lists the parents that still carry the controller's
	// finalizer, as the controller's watches last saw them.
	pending() []*unstructured.Unstructured
	// allParents lists every parent the controller's watches last saw.
	allParents() []*unstructured.Unstructured
}

func (c *composite) allParents() []*unstructured.Unstructured { return c.parents.index.list("", true) }

func (c *decorator) allParents() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, dr := range c.resources {
		out = append(out, dr.w.index.list("", true)...)
	}
	return out
}

func (c *composite) drain() bool {
	if !c.draining.CompareAndSwap(false, true) {
		return false
	}
	for _, o := range c.pending() {
		c.enqueueForced(c.keyOf(o))
	}
	return true
}

func (c *composite) pending() []*unstructured.Unstructured {
	return withFinalizer(c.parents.index.list("", true), c.finalizer)
}

func (c *decorator) drain() bool {
	if !c.draining.CompareAndSwap(false, true) {
		return false
	}
	for _, dr := range c.resources {
		for _, o := range withFinalizer(dr.w.index.list("", true), c.finalizer) {
			c.enqueueForced(parentKey{gvk: dr.gvk, NamespacedName: keyOf(o)})
		}
	}
	return true
}

func (c *decorator) pending() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, dr := range c.resources {
		out = append(out, withFinalizer(dr.w.index.list("", true), c.finalizer)...)
	}
	return out
}

// withFinalizer returns the objects of objs that carry finalizer.
func withFinalizer(objs []*unstructured.Unstructured, finalizer string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if slices.Contains(o.GetFinalizers(), finalizer) {
			out = append(out, o)
		}
	}
	return out
}

// cleanupTarget is a controller object whose finalizer the runner manages.
type cleanupTarget struct {
	key  string // "compositecontroller/<name>"
	kind string // "CompositeController"
	obj  client.Object
	// parents are the apiVersion and resource of its parent rules.
	parents [][2]string
	// hasFinalize: the spec has a finalize hook.
	hasFinalize bool
	start       func() (*running, error)
}

func compositeTarget(key string, cc *mcv1a1.CompositeController) cleanupTarget {
	return cleanupTarget{key: key, kind: "CompositeController", obj: cc,
		parents:     [][2]string{{cc.Spec.ParentResource.APIVersion, cc.Spec.ParentResource.Resource}},
		hasFinalize: cc.Spec.Hooks != nil && cc.Spec.Hooks.Finalize != nil}
}

func decoratorTarget(key string, dc *mcv1a1.DecoratorController) cleanupTarget {
	t := cleanupTarget{key: key, kind: "DecoratorController", obj: dc,
		hasFinalize: dc.Spec.Hooks != nil && dc.Spec.Hooks.Finalize != nil}
	for _, rr := range dc.Spec.Resources {
		t.parents = append(t.parents, [2]string{rr.APIVersion, rr.Resource})
	}
	return t
}

// setControllerFinalizer adds or removes ControllerFinalizer on obj with a
// merge patch guarded by its resourceVersion; obj is updated in place.
func (r *runner) setControllerFinalizer(ctx context.Context, obj client.Object, add bool) error {
	if controllerutil.ContainsFinalizer(obj, ControllerFinalizer) == add {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	if add {
		controllerutil.AddFinalizer(obj, ControllerFinalizer)
	} else {
		controllerutil.RemoveFinalizer(obj, ControllerFinalizer)
	}
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the finalizers of %s: %w", obj.GetName(), err)
	}
	return nil
}

// drainerOf returns the drainer of the controller running under key.
func (r *runner) drainerOf(key string) drainer {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.running[key]; cur != nil {
		return cur.drainer
	}
	return nil
}

// releaseWhenDone removes ControllerFinalizer from a live controller whose
// spec has no finalize hook (any more) once its running controller has
// removed its finalizer from every parent. It returns when to look again
// (0: nothing left to wait for).
func (r *runner) releaseWhenDone(ctx context.Context, t cleanupTarget) (time.Duration, error) {
	if t.hasFinalize || !controllerutil.ContainsFinalizer(t.obj, ControllerFinalizer) {
		return 0, nil
	}
	d := r.drainerOf(t.key)
	if d == nil {
		// Not running (an invalid spec): its parents may carry the
		// finalizer; the deletion cleans them up.
		return 0, nil
	}
	if len(d.pending()) > 0 {
		return cleanupPoll, nil
	}
	return 0, r.setControllerFinalizer(ctx, t.obj, false)
}

// finalizeController runs the cleanup of a deleted controller object
// (metadata.deletionTimestamp set) that carries ControllerFinalizer: its
// dynamic controller (started if it does not run, e.g. after the manager
// was down) finalizes the parents being deleted and releases the others
// (drainer); when none carries the parent finalizer any more, or the
// cleanup bound (cleanupTimeoutOf) has passed, the controller stops, the
// remaining parents lose the finalizer (Warning FinalizeTimedOut on each)
// and ControllerFinalizer goes. Without ControllerFinalizer the controller
// just stops.
func (r *runner) finalizeController(ctx context.Context, t cleanupTarget) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(t.obj, ControllerFinalizer) {
		r.stopKey(t.key)
		return reconcile.Result{}, nil
	}
	timeout, _ := cleanupTimeoutOf(t.obj)
	deadline := t.obj.GetDeletionTimestamp().Add(timeout)
	fin := parentFinalizer(t.kind, t.obj.GetName())
	d := r.drainerOf(t.key)
	if d == nil {
		r.stopKey(t.key)
		run, err := t.start()
		if err != nil {
			// Without a running controller there is no finalize call:
			// every parent is released now.
			n, lerr := r.forceRelease(ctx, t, nil, fmt.Sprintf("the %s %s was deleted and cannot run its finalize hook (%v): finalizer %s removed without this object's cleanup", t.kind, t.obj.GetName(), err, fin))
			if lerr != nil {
				return reconcile.Result{}, lerr
			}
			r.warn(t.obj, ReasonCleanupTimedOut, "Cleanup", "cannot run the finalize hook (%v): finalizer %s removed from %d object(s) without a finalize call", err, fin, n)
			r.log.Info("controller deleted; finalize hook not runnable, finalizers removed", "controller", t.key, "objects", n, "error", err.Error())
			return reconcile.Result{}, r.setControllerFinalizer(ctx, t.obj, false)
		}
		r.mu.Lock()
		r.running[t.key] = run
		r.mu.Unlock()
		d = run.drainer
	}
	// drain only enqueues: the parents it leaves pending are those listed
	// before it.
	pending := d.pending()
	if d.drain() {
		deleting, live := countDeleting(pending)
		r.note(t.obj, ReasonCleanupStarted, "Cleanup",
			"deleted: finalizing %d object(s) being deleted (for at most %s) and removing finalizer %s from %d other object(s)", deleting, timeout, fin, live)
		r.log.Info("controller deleted; cleaning up", "controller", t.key, "finalizing", deleting, "releasing", live, "timeout", timeout.String())
	}
	if len(pending) == 0 {
		r.stopKey(t.key)
		if err := r.setControllerFinalizer(ctx, t.obj, false); err != nil {
			return reconcile.Result{}, err
		}
		r.note(t.obj, ReasonCleanupDone, "Cleanup", "finalizer %s removed from every object", fin)
		return reconcile.Result{}, nil
	}
	if left := time.Until(deadline); left > 0 {
		return reconcile.Result{RequeueAfter: min(cleanupPoll, left)}, nil
	}
	r.stopKey(t.key)
	n, err := r.forceRelease(ctx, t, pending, fmt.Sprintf("the %s %s was deleted and its finalize hook had not finalized this object within %s: finalizer %s removed without this object's cleanup", t.kind, t.obj.GetName(), timeout, fin))
	if err != nil {
		return reconcile.Result{}, err
	}
	r.warn(t.obj, ReasonCleanupTimedOut, "Cleanup", "cleanup not done within %s (%s): finalizer %s removed from %d object(s) without their cleanup", timeout, CleanupTimeoutAnnotation, fin, n)
	r.log.Info("controller deleted; cleanup timed out, finalizers removed", "controller", t.key, "objects", n)
	return reconcile.Result{}, r.setControllerFinalizer(ctx, t.obj, false)
}

// countDeleting counts the objects being deleted and the others.
func countDeleting(objs []*unstructured.Unstructured) (deleting, live int) {
	for _, o := range objs {
		if o.GetDeletionTimestamp() != nil {
			deleting++
		} else {
			live++
		}
	}
	return deleting, live
}

// forceRelease removes the parent finalizer of t from objs (nil: from
// every object of t's parent resources, listed from the API server) and
// records a Warning FinalizeTimedOut Event with note on each object it
// changed. It returns how many it changed.
func (r *runner) forceRelease(ctx context.Context, t cleanupTarget, objs []*unstructured.Unstructured, note string) (int, error) {
	fin := parentFinalizer(t.kind, t.obj.GetName())
	if objs == nil {
		for i, p := range t.parents {
			res, err := r.resolve(p[0], p[1], fmt.Sprintf("spec.resources[%d]", i))
			if err != nil {
				// Not served: no object of it can carry the finalizer.
				continue
			}
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(res.gvk.GroupVersion().WithKind(res.gvk.Kind + "List"))
			if err := r.reader.List(ctx, l); err != nil {
				if meta.IsNoMatchError(err) {
					continue
				}
				return 0, err
			}
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		objs = withFinalizer(objs, fin)
	}
	n := 0
	for _, o := range objs {
		changed := false
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := r.reader.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			if !controllerutil.RemoveFinalizer(cur, fin) {
				return nil
			}
			if err := r.client.Update(ctx, cur); err != nil {
				return err
			}
			changed = true
			o = cur
			return nil
		})
		if client.IgnoreNotFound(err) != nil {
			return n, fmt.Errorf("removing finalizer %s from %s %s: %w", fin, o.GetKind(), describe(o), err)
		}
		if changed {
			n++
			r.warn(o, ReasonFinalizeTimedOut, "Cleanup", "%s", note)
		}
	}
	return n, nil
}
