package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/informers"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// Condition reasons of a controller's Ready condition about its targets.
const (
	// ReasonOwnerConflict: an object the controller's Updater should write
	// carries the owner annotation of another controller that runs; the
	// controller leaves it alone.
	ReasonOwnerConflict = "OwnerConflict"
	// ReasonTargetContested: another writer keeps changing a target object;
	// the controller restores it with backoff.
	ReasonTargetContested = "TargetContested"
)

// ConflictRecheckInterval is how often a controller looks again at the
// target objects another controller owns, for an owner that stopped
// elsewhere (another manager) without the object changing. Owners stopped in
// the same Runtime are noticed at once.
const ConflictRecheckInterval = 30 * time.Second

// ownerLookupTimeout bounds the read of an Operator object when deciding
// whether an owner runs.
const ownerLookupTimeout = 5 * time.Second

// liveSet holds the controller names of the operators a Runtime runs.
type liveSet struct {
	mu  sync.RWMutex
	ops map[string]map[string]bool
}

func (l *liveSet) set(op string, names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops = map[string]map[string]bool{}
	}
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	l.ops[op] = m
}

func (l *liveSet) remove(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.ops, op)
}

func (l *liveSet) get(op string) (map[string]bool, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	m, ok := l.ops[op]
	return m, ok
}

// ownerLive reports whether the controller named by an owner annotation
// value ("<operator>/<controller>", or "<operator>/<controller>/<target>"
// for a named target) runs: an operator of this Runtime whose spec has that controller, or
// else an Operator object in the cluster whose spec has it (another manager
// may run it). When the cluster cannot tell (an error other than not found),
// the owner counts as running: leaving an object alone is safer than
// fighting over it.
func (r *Runtime) ownerLive(owner string) bool {
	op, ctrl, ok := strings.Cut(owner, "/")
	if !ok {
		return false
	}
	// A named target's owner is "<operator>/<controller>/<target>"
	// (controller.Target.Owner); a controller name may hold '/' too.
	short := ctrl
	if i := strings.LastIndex(ctrl, "/"); i >= 0 {
		short = ctrl[:i]
	}
	if names, running := r.live.get(op); running {
		return names[ctrl] || names[short]
	}
	if r.opts.Client == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), ownerLookupTimeout)
	defer cancel()
	o := &opv1a1.Operator{}
	if err := r.opts.Client.Get(ctx, types.NamespacedName{Name: op}, o); err != nil {
		return !(apierrors.IsNotFound(err) || meta.IsNoMatchError(err))
	}
	if !o.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range o.Spec.Controllers {
		if c.Name == ctrl || c.Name == short {
			return true
		}
	}
	return false
}

// recheckConflictsLocked asks every running controller that leaves objects
// to another owner to look at them again (an owner may have stopped). The
// caller holds r.mu (held briefly: queueing the checks does not wait).
func (r *Runtime) recheckConflictsLocked() {
	for _, run := range r.operators {
		run.mu.Lock()
		for _, rc := range run.ctrls {
			rc.recheckConflicts()
		}
		run.mu.Unlock()
	}
}

func (rc *runningController) recheckConflicts() {
	for _, t := range rc.c.Targets() {
		for _, oc := range t.Conflicts() {
			rc.queue.Add(itemKey{gvk: t.GVK, key: oc.Key, target: t})
		}
	}
}

// watchTarget watches the kind of each of the controller's targets (the
// shared informer of a native kind, or the view store) and queues a
// restore check of each changed or deleted object a target tracks
// (controller.Target.Tracks), so that objects changed or deleted by
// someone else are restored within seconds. It also rechecks owner
// conflicts every ConflictRecheckInterval.
func (r *Runtime) watchTarget(ctx context.Context, run *running, rc *runningController) error {
	for _, t := range rc.c.Targets() {
		if err := r.watchOneTarget(ctx, run, rc, t); err != nil {
			return err
		}
	}
	run.done.Add(1)
	go func() {
		defer run.done.Done()
		wait.UntilWithContext(ctx, func(context.Context) { rc.recheckConflicts() }, ConflictRecheckInterval)
	}()
	return nil
}

// watchOneTarget is watchTarget for target t.
func (r *Runtime) watchOneTarget(ctx context.Context, run *running, rc *runningController, t *controller.Target) error {
	c := rc.c
	gvk := t.GVK
	check := func(obj *unstructured.Unstructured) {
		if obj != nil && run.inScope(obj) && t.Tracks(obj) {
			rc.queue.Add(itemKey{gvk: gvk, key: object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, target: t})
		}
	}
	if r.isView(gvk) {
		cancel := r.views.Subscribe(func(ev view.Event) {
			if ev.Object.GroupVersionKind() == gvk {
				check(ev.Object)
			}
		})
		rc.stop = append(rc.stop, cancel)
	} else {
		var inf eventSource
		if s := rc.sharded[gvk]; s != nil {
			// The target is also a source, watched sharded.
			inf = s.events()
		} else {
			run.setWaiting(rc.name, fmt.Sprintf("%s: waiting for the informer of %s to sync (up to %s)", targetPath(rc.name, run, t), gvk, InformerSyncTimeout))
			ictx, cancel := context.WithTimeout(ctx, InformerSyncTimeout)
			ci, release, err := informers.Acquire(ictx, r.opts.Cache, gvk)
			cancel()
			rc.release = append(rc.release, release)
			if err != nil {
				if ctx.Err() == nil {
					err = informers.SyncError(gvk, err)
				}
				return fmt.Errorf("%s: watching %s: %w", targetPath(c.Name(), run, t), gvk, err)
			}
			inf = ci
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				u, _ := o.(*unstructured.Unstructured)
				check(u)
			},
			UpdateFunc: func(_, n any) {
				u, _ := n.(*unstructured.Unstructured)
				check(u)
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				u, _ := o.(*unstructured.Unstructured)
				check(u)
			},
		})
		if err != nil {
			return fmt.Errorf("%s: watching %s: %w", targetPath(c.Name(), run, t), gvk, err)
		}
		rc.stop = append(rc.stop, func() { _ = inf.RemoveEventHandler(reg) })
	}
	return nil
}

// controllerPath returns the spec path of a controller by name.
func controllerPath(name string, run *running) string {
	for i, n := range run.order {
		if n == name {
			return fmt.Sprintf("spec.controllers[%d]", i)
		}
	}
	return "spec.controllers"
}

// targetPath returns the spec path of target t of a controller by name:
// the target's own path under the controller's.
func targetPath(name string, run *running, t *controller.Target) string {
	_, rest, _ := strings.Cut(t.Path, "]")
	return controllerPath(name, run) + rest
}

// restore handles a queued restore check of one target object; a restore
// held back by its backoff is queued again for when it is due.
func (r *Runtime) restore(ctx context.Context, rc *runningController, it itemKey) {
	wait, err := it.target.RestoreTarget(ctx, it.key)
	if err != nil {
		// Recorded by the controller and retried with the failed writes.
		return
	}
	if wait > 0 {
		rc.queue.AddAfter(it, wait)
	}
}

// conflictMessage words the owner conflicts of c's targets for its Ready
// condition: those of the first target that has some (see
// controller.Target.ConflictMessage); "" when none has.
func conflictMessage(c *controller.Controller) string {
	for _, t := range c.Targets() {
		if msg := t.ConflictMessage(); msg != "" {
			return msg
		}
	}
	return ""
}

// contestedMessage is conflictMessage for contested target objects
// (controller.Target.ContestedMessage).
func contestedMessage(c *controller.Controller) string {
	for _, t := range c.Targets() {
		if msg := t.ContestedMessage(); msg != "" {
			return msg
		}
	}
	return ""
}
