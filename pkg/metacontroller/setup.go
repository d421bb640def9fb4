package metacontroller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/events"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// DefaultWorkers is the number of parents a controller syncs in parallel
// when Options.Workers is 0 (Metacontroller's default too).
const DefaultWorkers = 5

// ApplyStrategy names how children are written (Metacontroller's
// --apply-strategy).
type ApplyStrategy string

const (
	// DynamicApply merges the desired child into the observed one in the
	// style of kubectl apply (the last-applied annotation, conventional
	// merge keys for lists) and updates it; the default.
	DynamicApply ApplyStrategy = "dynamic-apply"
	// ServerSideApply sends the desired child as a server-side apply
	// patch under Options.FieldManager, forcing ownership of the fields
	// it sets; the API server merges by the type's schema.
	ServerSideApply ApplyStrategy = "server-side-apply"
)

// DefaultFieldManager is the server-side apply field manager when
// Options.FieldManager is empty (Metacontroller's default).
const DefaultFieldManager = "metacontroller"

// ParseApplyStrategy checks an apply strategy name ("" is DynamicApply).
func ParseApplyStrategy(s string) (ApplyStrategy, error) {
	switch ApplyStrategy(s) {
	case "", DynamicApply:
		return DynamicApply, nil
	case ServerSideApply:
		return ServerSideApply, nil
	}
	return "", fmt.Errorf("unknown apply strategy %q (want %s or %s)", s, DynamicApply, ServerSideApply)
}

// Options configure Setup.
type Options struct {
	// Logger receives structured logs.
	Logger logr.Logger
	// Workers is the number of parents each controller syncs in parallel
	// (default DefaultWorkers).
	Workers int
	// TargetSelector restricts this manager to the CompositeControllers and
	// DecoratorControllers whose labels it matches (Metacontroller's
	// --target-label-selector): the others are not started, and neither
	// they, their parents nor their children are written. nil selects
	// every controller.
	TargetSelector labels.Selector
	// ApplyStrategy is how children are written (default DynamicApply).
	ApplyStrategy ApplyStrategy
	// FieldManager is the field manager of ServerSideApply writes
	// (default DefaultFieldManager).
	FieldManager string
	// DiscoveryInterval is the longest wait before a controller whose
	// resources are not served yet looks them up again in discovery
	// (default one minute).
	DiscoveryInterval time.Duration
	// EventsQPS and EventsBurst bound the Events recorded about each object
	// to a token bucket (events per second, burst); 0 for either leaves
	// Events unbounded.
	EventsQPS   float64
	EventsBurst int
	// Ring, when set, is this manager's share of the work in a ring of
	// active replicas (dctl start --sharding): every member runs every
	// controller, but syncs only the parents whose UID falls in its
	// buckets, and writes a controller object's status and finalizer only
	// when the object's key falls in them; every write checks the ring's
	// fence first (sharding.FenceWrites). nil: all of it.
	Ring *sharding.Ring
	// Counters, when set, counts this manager's syncs.
	Counters *Counters
	// HookLimits bound what one hook answer may hold (zero fields: the
	// hook package's defaults; dctl start --hook-max-*).
	HookLimits hook.Limits
}

// running is one started CompositeController or DecoratorController.
type running struct {
	stamp string
	// halt stops the controller; the function it returns releases the
	// controller's informers (engine.halt).
	halt func() (release func())
	// parent is the parent kind of a CompositeController and whether its
	// parentResource has a labelSelector.
	parent      schema.GroupVersionKind
	parentScope bool
	// drainer runs the cleanup when the controller object is deleted.
	drainer drainer
	// served is the controller's engine.served: nil while the API server
	// serves its parent and child kinds (nil: not checked).
	served func() error
}

// runner keeps the dynamic controllers of a manager.
type runner struct {
	deps
	ctx context.Context

	mu      sync.Mutex
	running map[string]*running
	// attempts counts the failed starts per controller, for the retry
	// delay.
	attempts map[string]int
	// target selects the controllers this manager runs (nil: all).
	target labels.Selector
	// maxRetryDelay bounds the wait between start attempts.
	maxRetryDelay time.Duration
	// recheck receive the CompositeControllers and DecoratorControllers to
	// reconcile again (a kind of theirs stopped being served: watchServed).
	recheckComposite, recheckDecorator chan event.GenericEvent
}

// Setup registers reconcilers for CompositeController and
// DecoratorController objects with mgr. Each object runs as a dynamic
// controller from when the manager starts (and, with leader election, wins)
// until the object is deleted or ctx ends; a change of its generation or
// annotations restarts it. The controllers use mgr's shared informer cache
// for reads, its client for writes, its API reader for the Secrets and
// ConfigMaps that webhooks name, and its RESTMapper for discovery. The
// types must be in mgr's scheme (operator.NewScheme adds them). When the
// metacontroller.k8s.io CRDs are not installed, Setup logs it and registers
// nothing; other discovery errors are returned.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	strategy, err := ParseApplyStrategy(string(opts.ApplyStrategy))
	if err != nil {
		return err
	}
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}
	if opts.DiscoveryInterval <= 0 {
		opts.DiscoveryInterval = maxStartRetryDelay
	}
	log := opts.Logger.WithName("metacontroller")
	r := &runner{ctx: ctx, running: map[string]*running{}, attempts: map[string]int{},
		target: opts.TargetSelector, maxRetryDelay: opts.DiscoveryInterval,
		recheckComposite: make(chan event.GenericEvent), recheckDecorator: make(chan event.GenericEvent), deps: deps{
			client: sharding.FenceWrites(mgr.GetClient(), opts.Ring), reader: mgr.GetAPIReader(), cache: mgr.GetCache(), mapper: mgr.GetRESTMapper(),
			recorder: events.Limit(mgr.GetEventRecorder("dcontroller-metacontroller"), opts.EventsQPS, opts.EventsBurst),
			log:      log, workers: opts.Workers, applyStrategy: strategy, fieldManager: opts.FieldManager,
			ring: opts.Ring, counters: opts.Counters, hookLimits: opts.HookLimits,
		}}
	opts.Ring.OnChange(r.onReshard)
	if opts.Counters != nil {
		f := r.ownedParents
		opts.Counters.parents.Store(&f)
	}
	// Without the CRDs the controllers could not start their watches and
	// would stop the whole manager: run without them instead.
	for _, kind := range []string{"CompositeController", "DecoratorController", "ControllerRevision"} {
		if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: mcv1a1.GroupName, Kind: kind}, mcv1a1.Version); err != nil {
			if meta.IsNoMatchError(err) {
				log.Info("the metacontroller.k8s.io CRDs are not installed: CompositeController and DecoratorController are disabled (apply config/crd/ and restart)", "missing", kind)
				return nil
			}
			return fmt.Errorf("discovering %s.%s: %w", kind, mcv1a1.GroupName, err)
		}
	}
	// The informers of the controller kinds start with the cache, which
	// the manager's readiness check waits for (operator.NewManager): a
	// controller object created once the manager is ready is reconciled
	// right away instead of queued until the controllers have started.
	for _, o := range []client.Object{&mcv1a1.CompositeController{}, &mcv1a1.DecoratorController{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, o); err != nil {
			return fmt.Errorf("watching %T: %w", o, err)
		}
	}
	// A label change may move a controller into or out of TargetSelector.
	changed := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
		predicate.LabelChangedPredicate{}))
	// Controllers start concurrently: one whose informers do not sync (a
	// kind the manager may not list) holds back no other.
	skip := controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: StartWorkers}
	if err := ctrl.NewControllerManagedBy(mgr).Named("metacontroller-compositecontroller").
		For(&mcv1a1.CompositeController{}, changed).WithOptions(skip).
		WatchesRawSource(source.Channel(r.recheckComposite, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(r.reconcileComposite)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("metacontroller-decoratorcontroller").
		For(&mcv1a1.DecoratorController{}, changed).WithOptions(skip).
		WatchesRawSource(source.Channel(r.recheckDecorator, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(r.reconcileDecorator)); err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		r.watchServed(ctx)
		r.stopAll()
		return nil
	}))
}

// servedCheckPeriod is how often watchServed checks that the kinds of the
// running controllers are served.
const servedCheckPeriod = time.Second

// watchServed checks every servedCheckPeriod, until ctx ends, that the API
// server serves the parent and child kinds of every running controller
// (running.served), and has the controller object of each one that lost a
// kind reconciled: upsert then stops it, its status turns Ready=False
// KindNotFound, and its start is retried until the kind is served again.
// Other controllers are left alone.
func (r *runner) watchServed(ctx context.Context) {
	t := time.NewTicker(servedCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		runs := make(map[string]*running, len(r.running))
		for k, run := range r.running {
			runs[k] = run
		}
		r.mu.Unlock()
		for key, run := range runs {
			if run.served == nil || run.served() == nil {
				continue
			}
			kind, name, _ := strings.Cut(key, "/")
			var ev event.GenericEvent
			var ch chan event.GenericEvent
			switch kind {
			case "compositecontroller":
				ev.Object, ch = &mcv1a1.CompositeController{ObjectMeta: metav1.ObjectMeta{Name: name}}, r.recheckComposite
			case "decoratorcontroller":
				ev.Object, ch = &mcv1a1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: name}}, r.recheckDecorator
			default:
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// stamp identifies a spec version: generation plus annotations (changing
// an annotation reloads a controller, e.g. after a CA rotation).
func stamp(o metav1.Object) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d", o.GetUID(), o.GetGeneration())
	keys := make([]string, 0, len(o.GetAnnotations()))
	for k := range o.GetAnnotations() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%s", k, o.GetAnnotations()[k])
	}
	return b.String()
}

// stop stops the controller and releases its informers.
func (run *running) stop() { run.halt()() }

func (r *runner) stopKey(key string) { r.haltKey(key)() }

// haltKey is stopKey with the controller's informers released by the
// function it returns.
func (r *runner) haltKey(key string) (release func()) {
	r.mu.Lock()
	cur := r.running[key]
	delete(r.running, key)
	r.mu.Unlock()
	if cur == nil {
		// A controller whose start failed has its ready gauge at 0.
		forgetMetrics(key)
		return func() {}
	}
	release = cur.halt()
	r.log.Info("controller stopped", "controller", key)
	return release
}

func (r *runner) stopAll() {
	r.mu.Lock()
	all := r.running
	r.running = map[string]*running{}
	r.mu.Unlock()
	for _, cur := range all {
		cur.stop()
	}
}

// upsert (re)starts the controller under key unless it already runs the
// same stamp; start returns what runs (its stop function, for composites
// the parent kind). A controller that runs the same stamp but one of
// whose kinds is no longer served (running.served) is stopped instead,
// its informers released, and the served error returned (retryable,
// KindNotFound): the next upsert starts it again.
func (r *runner) upsert(key, st string, start func() (*running, error)) (bool, error) {
	r.mu.Lock()
	cur := r.running[key]
	r.mu.Unlock()
	if cur != nil && cur.stamp == st {
		if cur.served == nil {
			return false, nil
		}
		err := cur.served()
		if err == nil {
			return false, nil
		}
		r.log.Info("a kind of the controller is no longer served; stopping it until it is", "controller", key, "error", err.Error())
		r.stopKey(key)
		startFailedMetrics(key)
		return true, err
	}
	// The new spec's controller takes over the informers of the previous
	// one before they are released.
	release := r.haltKey(key)
	defer release()
	run, err := start()
	if err != nil {
		startFailedMetrics(key)
		return true, err
	}
	run.stamp = st
	r.mu.Lock()
	r.running[key] = run
	r.mu.Unlock()
	return true, nil
}

// sameParents lists the other running CompositeControllers with the parent
// kind of key, when either of the two has no parentResource.labelSelector:
// two controllers of the same parents overwrite each other's children and
// status.
func (r *runner) sameParents(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	me := r.running[key]
	if me == nil || me.parent.Empty() {
		return nil
	}
	var out []string
	for k, o := range r.running {
		if k != key && o.parent == me.parent && (!o.parentScope || !me.parentScope) {
			out = append(out, strings.TrimPrefix(k, "compositecontroller/"))
		}
	}
	sort.Strings(out)
	return out
}

func (r *runner) reconcileComposite(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := "compositecontroller/" + req.Name
	cc := &mcv1a1.CompositeController{}
	if err := r.client.Get(ctx, req.NamespacedName, cc); err != nil {
		if apierrors.IsNotFound(err) {
			r.stopKey(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !r.targets(cc) {
		r.stopKey(key)
		return reconcile.Result{}, nil
	}
	start := func() (*running, error) {
		c, err := startComposite(r.ctx, r.deps, cc)
		if err != nil {
			return nil, err
		}
		return &running{halt: c.halt, parent: c.parent.gvk, parentScope: cc.Spec.ParentResource.LabelSelector != nil, drainer: c, served: c.served}, nil
	}
	ct := compositeTarget(key, cc)
	ct.start = start
	release, owner := r.ring.AcquireBucket(sharding.NameBucket(controllerKey(key)))
	defer release()
	if !owner {
		return r.reconcileNotOwned(ct), nil
	}
	if cc.DeletionTimestamp != nil {
		return r.finalizeController(ctx, ct)
	}
	if ct.hasFinalize {
		// Before any parent gets the parent finalizer.
		if err := r.setControllerFinalizer(ctx, cc, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	started, err := r.upsert(key, stamp(cc), start)
	if others := r.sameParents(key); started && err == nil && len(others) > 0 {
		r.warn(cc, "ParentsShared", "Start",
			"CompositeController(s) %s also manage %s parents: two controllers of the same parents overwrite each other's children and status; give them disjoint parentResource.labelSelector",
			strings.Join(others, ", "), cc.Spec.ParentResource.Resource)
		r.log.Info("parents shared with other controllers", "compositecontroller", cc.Name, "others", others)
	}
	if serr := r.writeStatus(ctx, cc, &cc.Status.Conditions, &cc.Status.ObservedGeneration, err); serr != nil && err == nil {
		return reconcile.Result{}, serr
	}
	return r.withRelease(ctx, ct, r.startResult(key, cc, err))
}

// withRelease adds to res the wait of releaseWhenDone.
func (r *runner) withRelease(ctx context.Context, t cleanupTarget, res reconcile.Result) (reconcile.Result, error) {
	again, err := r.releaseWhenDone(ctx, t)
	if err != nil {
		return reconcile.Result{}, err
	}
	if again > 0 && (res.RequeueAfter == 0 || again < res.RequeueAfter) {
		res.RequeueAfter = again
	}
	return res, nil
}

func (r *runner) reconcileDecorator(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := "decoratorcontroller/" + req.Name
	dc := &mcv1a1.DecoratorController{}
	if err := r.client.Get(ctx, req.NamespacedName, dc); err != nil {
		if apierrors.IsNotFound(err) {
			r.stopKey(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	if !r.targets(dc) {
		r.stopKey(key)
		return reconcile.Result{}, nil
	}
	start := func() (*running, error) {
		c, err := startDecorator(r.ctx, r.deps, dc)
		if err != nil {
			return nil, err
		}
		return &running{halt: c.halt, drainer: c, served: c.served}, nil
	}
	dt := decoratorTarget(key, dc)
	dt.start = start
	release, owner := r.ring.AcquireBucket(sharding.NameBucket(controllerKey(key)))
	defer release()
	if !owner {
		return r.reconcileNotOwned(dt), nil
	}
	if dc.DeletionTimestamp != nil {
		return r.finalizeController(ctx, dt)
	}
	if dt.hasFinalize {
		// Before any object gets the decorator's finalizer.
		if err := r.setControllerFinalizer(ctx, dc, true); err != nil {
			return reconcile.Result{}, err
		}
	}
	_, err := r.upsert(key, stamp(dc), start)
	if serr := r.writeStatus(ctx, dc, &dc.Status.Conditions, &dc.Status.ObservedGeneration, err); serr != nil && err == nil {
		return reconcile.Result{}, serr
	}
	return r.withRelease(ctx, dt, r.startResult(key, dc, err))
}

// startResult reports a failed start of the controller under key (log,
// a Warning Event whose reason is the Ready condition's: KindNotFound,
// StartFailed or InvalidSpec, reasonOf) and says when to try again: an
// error that can mend itself (a resource not served yet, an informer that
// did not sync) is retried after 1s, 2s, ... up to maxStartRetryDelay;
// any other waits for a change of the spec.
func (r *runner) startResult(key string, obj client.Object, err error) reconcile.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.attempts, key)
		return reconcile.Result{}
	}
	if errors.Is(err, errNoLongerServed) {
		r.warn(obj, reasonOf(err), "Stop", "stopped: %v", err)
	} else {
		r.warn(obj, reasonOf(err), "Start", "not started: %v", err)
	}
	if !isRetryable(err) {
		delete(r.attempts, key)
		r.log.Error(err, "controller not started; waiting for a change of its spec", "controller", key)
		return reconcile.Result{}
	}
	n := r.attempts[key]
	r.attempts[key] = n + 1
	delay := r.maxRetryDelay
	if n < 6 {
		delay = min(time.Second<<n, r.maxRetryDelay)
	}
	r.log.Info("controller not started yet; retrying", "controller", key, "in", delay.String(), "error", err.Error())
	return reconcile.Result{RequeueAfter: delay}
}

// StartWorkers is how many CompositeControllers, and how many
// DecoratorControllers, are reconciled (and so started) at once.
const StartWorkers = 4

// maxStartRetryDelay bounds the wait between start attempts of a
// controller whose resources are not served yet, when
// Options.DiscoveryInterval is 0.
const maxStartRetryDelay = time.Minute

// targets reports whether this manager runs the controller obj
// (Options.TargetSelector). A controller it does not run is stopped if it
// ran and otherwise left alone: no status, no Events, no finalizers.
func (r *runner) targets(obj metav1.Object) bool {
	return r.target == nil || r.target.Matches(labels.Set(obj.GetLabels()))
}

// writeStatus records the outcome of a start in the controller object's
// status (Ready condition, observedGeneration); no write when unchanged.
// The condition is True with reason Running, or False with the reason of
// startErr (reasonOf: KindNotFound, StartFailed, InvalidSpec) and its
// message.
func (r *runner) writeStatus(ctx context.Context, obj client.Object, conds *[]metav1.Condition, observed *int64, startErr error) error {
	before := append([]metav1.Condition(nil), (*conds)...)
	beforeGen := *observed
	c := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: ReasonRunning, Message: "the controller runs", ObservedGeneration: obj.GetGeneration()}
	if startErr != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonOf(startErr), startErr.Error()
	}
	meta.SetStatusCondition(conds, c)
	*observed = obj.GetGeneration()
	if beforeGen == *observed && conditionsEqual(before, *conds) {
		return nil
	}
	return r.client.Status().Update(ctx, obj)
}

func conditionsEqual(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}
