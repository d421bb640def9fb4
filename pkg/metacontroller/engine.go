package metacontroller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/events"
	"github.com/dcontroller/dcontroller/internal/procmem"
	"github.com/dcontroller/dcontroller/pkg/informers"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// deps are the parts of the manager a dynamic controller uses.
type deps struct {
	client   client.Client
	reader   client.Reader
	cache    cache.Cache
	mapper   meta.RESTMapper
	recorder recorder.EventRecorder
	log      logr.Logger
	workers  int
	// applyStrategy and fieldManager are how children are written
	// (Options.ApplyStrategy, Options.FieldManager).
	applyStrategy ApplyStrategy
	fieldManager  string
	// ring is this manager's share of the parents (nil: all of them).
	ring *sharding.Ring
	// counters, when set, counts the parents this member synced.
	counters *Counters
	// hookLimits bound the hooks' answers (Options.HookLimits).
	hookLimits hook.Limits
}

// ownParent takes the ring's guard on parent (by UID, Options.Ring): ok
// when this member works it; release must be called once the sync's writes
// are done.
func (d *deps) ownParent(parent metav1.Object) (release func(), ok bool) {
	return d.ring.Acquire(string(parent.GetUID()))
}

// warn records a Warning Event on obj, its note cut to what an Event may
// hold (events.Note).
func (d *deps) warn(obj runtime.Object, reason, action, format string, args ...any) {
	d.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, action, "%s", events.Note(format, args...))
}

// resource is a resolved resource rule.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
}

// resolve maps apiVersion and a plural resource name to the kind and scope,
// through the RESTMapper (discovery). path prefixes errors.
func (d *deps) resolve(apiVersion, res, path string) (resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return resource{}, fmt.Errorf("%s.apiVersion: %w", path, err)
	}
	if res == "" {
		return resource{}, fmt.Errorf("%s.resource: required", path)
	}
	gvr := gv.WithResource(res)
	gvk, err := d.mapper.KindFor(gvr)
	if err != nil {
		// The resource may be installed later: retried.
		return resource{}, discoveryFailed(fmt.Errorf("%s: resource %q in %q: %w", path, res, apiVersion, err))
	}
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resource{}, discoveryFailed(fmt.Errorf("%s: resource %q in %q: %w", path, res, apiVersion, err))
	}
	return resource{gvr: gvr, gvk: gvk, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// SyncAfterWritesAnnotation, set to "false" on a CompositeController or
// DecoratorController, turns off the follow-up sync: by default, once the
// events of a sync's own writes (children, status) have all arrived, the
// parent is synced once more so that the hook observes what it asked for
// (Metacontroller's contract: a status reflects the observed children).
// Without it a change costs exactly one hook call; the hook sees its own
// writes at the next change or resync. Syncs that still have work of their
// own (finalizing, a rolling update) always follow up.
const SyncAfterWritesAnnotation = "dcontroller.io/sync-after-writes"

// followUpOf reads SyncAfterWritesAnnotation from o (default true).
func followUpOf(o metav1.Object) (bool, error) {
	v, ok := o.GetAnnotations()[SyncAfterWritesAnnotation]
	if !ok {
		return true, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return true, fmt.Errorf("metadata.annotations[%q]: %q is not a boolean (true or false)", SyncAfterWritesAnnotation, v)
	}
	return b, nil
}

// Reasons of the Ready condition of a CompositeController or
// DecoratorController (and of the Warning Events of a failed start), as
// for the controllers of an Operator.
const (
	// ReasonRunning: the controller runs.
	ReasonRunning = "Running"
	// ReasonInvalidSpec: the spec cannot run as it is (an invalid hook, a
	// child declared twice, ...); nothing happens until it changes.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonKindNotFound: a parent or child resource is not served by the
	// API server (its CRD not installed yet, or deleted while the
	// controller ran); the start is retried until it is.
	ReasonKindNotFound = "KindNotFound"
	// ReasonStartFailed: the start failed for a reason that may go away
	// by itself (an informer that delivers no initial list within
	// InformerSyncTimeout, a discovery error); retried.
	ReasonStartFailed = "StartFailed"
)

// retryable marks a start error that may go away without a change of the
// controller's spec (a resource not served yet, a watch that failed);
// other start errors are the spec's and wait for it to change. reason is
// the Ready condition's reason: ReasonKindNotFound or ReasonStartFailed.
type retryable struct {
	error
	reason string
}

func (r retryable) Unwrap() error { return r.error }

// kindNotFound marks err as retryable with ReasonKindNotFound.
func kindNotFound(err error) retryable { return retryable{err, ReasonKindNotFound} }

// startFailed marks err as retryable with ReasonStartFailed.
func startFailed(err error) retryable { return retryable{err, ReasonStartFailed} }

// discoveryFailed marks an error of the REST mapper (discovery) as
// retryable: ReasonKindNotFound when it knows no such resource or kind
// (meta.IsNoMatchError) or answered 404, else ReasonStartFailed (e.g. the
// discovery of a group failed).
func discoveryFailed(err error) retryable {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
		return kindNotFound(err)
	}
	return startFailed(err)
}

// isRetryable reports whether err (or an error it wraps) is retryable.
func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// reasonOf is the Ready condition's reason for a start error err:
// ReasonRunning for nil, the reason of the retryable err wraps, else
// ReasonInvalidSpec.
func reasonOf(err error) string {
	var r retryable
	switch {
	case err == nil:
		return ReasonRunning
	case errors.As(err, &r) && r.reason != "":
		return r.reason
	case errors.As(err, &r):
		return ReasonStartFailed
	}
	return ReasonInvalidSpec
}

// hooks are a controller's sync and finalize hooks with their contract
// versions (finalize may be nil).
type hooks struct {
	syncHook, finHook hook.Caller
	version, finVer   mcv1a1.HookVersion
	// custHook is the customize hook (nil without one), kept for its
	// metrics: the related-objects rules call it.
	custHook hook.Caller
}

// newHooks builds the sync, finalize and customize hooks of a controller
// (spec paths spec.hooks.<name>). A sync or a finalize hook is required
// (Metacontroller's hooks are all optional, but a controller with neither
// has nothing to call); with only finalize, live parents get the finalizer
// and no call. It returns the customize caller (nil without one) for the
// related-objects rules.
func newHooks(d deps, controller string, sync, finalize, customize *mcv1a1.Hook, eps []mcv1a1.EndpointConfig) (hooks, hook.Caller, error) {
	if sync == nil && finalize == nil {
		return hooks{}, nil, errors.New("spec.hooks: a sync or a finalize hook is required")
	}
	build := func(h *mcv1a1.Hook, name string) (hook.Caller, error) {
		return hook.New(h, hook.Options{Controller: controller, Hook: name, Path: "spec.hooks." + name, EndpointConfigs: eps, Reader: d.reader, Limits: d.hookLimits})
	}
	var hs hooks
	var err error
	if hs.syncHook, err = build(sync, "sync"); err != nil {
		return hooks{}, nil, err
	}
	if hs.finHook, err = build(finalize, "finalize"); err != nil {
		return hooks{}, nil, err
	}
	cust, err := build(customize, "customize")
	if err != nil {
		return hooks{}, nil, err
	}
	hs.version, hs.finVer = hookVersion(sync), hookVersion(finalize)
	hs.custHook = cust
	return hs, cust, nil
}

// setHooks builds the controller's hooks (newHooks) and returns its
// customize caller.
func (e *engine) setHooks(sync, finalize, customize *mcv1a1.Hook, eps []mcv1a1.EndpointConfig) (hook.Caller, error) {
	hs, cust, err := newHooks(e.deps, e.name, sync, finalize, customize, eps)
	e.hooks = hs
	return cust, err
}

// hookVersion is the contract version of a hook (v1 when unset).
func hookVersion(h *mcv1a1.Hook) mcv1a1.HookVersion {
	if h != nil && h.Version != nil && *h.Version != "" {
		return *h.Version
	}
	return mcv1a1.HookVersionV1
}

// forPhase returns the hook a sync calls (finalize while finalizing),
// its contract version and its name for messages ("Sync", "Finalize").
func (h hooks) forPhase(finalizing bool) (hook.Caller, mcv1a1.HookVersion, string) {
	if finalizing {
		return h.finHook, h.finVer, "Finalize"
	}
	return h.syncHook, h.version, "Sync"
}

// upToDate reports whether a sync of pk may stop before calling the hook:
// the observed state (fingerprint fp) is the one of the last successful
// sync, no resync is due and the sync has written nothing. It returns the
// parent's state for synced.
func (e *engine) upToDate(pk parentKey, fp string, w writes) (*parentState, bool) {
	st := e.state(pk)
	e.mu.Lock()
	same := st.fingerprint == fp
	e.mu.Unlock()
	if forced := e.takeForced(pk, st); same && !forced && len(w) == 0 {
		e.log.V(2).Info("sync skipped: observed state unchanged", "parent", pk.String())
		syncsTotal.WithLabelValues(e.name, "skipped").Inc()
		return st, true
	}
	e.lastCall.Store(time.Now().UnixNano())
	return st, false
}

// synced records a successful sync of the observed state fp.
func (e *engine) synced(st *parentState, fp string) {
	e.mu.Lock()
	st.fingerprint = fp
	e.mu.Unlock()
	syncsTotal.WithLabelValues(e.name, "synced").Inc()
}

// errRequeue asks the worker to retry after a delay without counting a
// failure (e.g. a related watch that has not synced yet).
type errRequeue struct{ after time.Duration }

func (e errRequeue) Error() string { return fmt.Sprintf("requeue after %s", e.after) }

// parentState is what a controller remembers about one parent.
type parentState struct {
	// fingerprint of the observed state at the last successful sync.
	fingerprint string
	// forced: the next sync calls the hook even if nothing changed.
	forced bool
	// resyncAt: when the hook's resyncAfterSeconds asked for a sync.
	resyncAt time.Time
	// unsettled counts the consecutive syncs that wrote something and
	// were followed up (settleFollowUp).
	unsettled int
	// customize caches the customize hook's answer.
	customizeKey string
	related      []relatedRule
}

// engine is the part shared by composite and decorator controllers: a
// work queue of parents, workers, watches, expectations and per-parent
// state.
type engine struct {
	deps
	// name labels metrics: "<kind>/<name>".
	name  string
	queue workqueue.TypedRateLimitingInterface[parentKey]
	hooks
	// followUp: sync a parent again once the events of its own writes
	// have arrived (SyncAfterWritesAnnotation; default true).
	followUp bool
	exp      *expectations
	sync     func(ctx context.Context, pk parentKey) error

	mu       sync.Mutex
	states   map[parentKey]*parentState
	watches  []*watch
	required []requiredKind                   // kinds of the watches with a spec path (served)
	noStatus map[schema.GroupVersionKind]bool // kinds without a status subresource
	ctx      context.Context                  // of the workers, set by start; cancelled by stop
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// busy counts the syncs running; lastCall is when the last sync that
	// calls a hook got past upToDate (UnixNano), for releaseAfterLoad.
	busy     atomic.Int32
	lastCall atomic.Int64
	// afterLoad and loadIdle are releaseAfterLoad's release
	// (procmem.ReleaseAfterLoad) and wait (loadIdle); replaced in tests.
	afterLoad func(objects int, log logr.Logger) bool
	loadIdle  time.Duration
}

func newEngine(d deps, name string) *engine {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[parentKey](250*time.Millisecond, 2*time.Minute)
	return &engine{
		deps:   d,
		name:   name,
		queue:  workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[parentKey]{}),
		exp:    newExpectations(),
		states: map[parentKey]*parentState{},
		// The hook controllers' initial syncs share the release of an
		// Operator's initial load.
		afterLoad: procmem.ReleaseAfterLoad,
		loadIdle:  loadIdle,
	}
}

func (e *engine) state(pk parentKey) *parentState {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.states[pk]
	if s == nil {
		s = &parentState{}
		e.states[pk] = s
	}
	return s
}

func (e *engine) dropState(pk parentKey) {
	e.mu.Lock()
	delete(e.states, pk)
	e.mu.Unlock()
	e.exp.forget(pk)
}

// enqueue schedules a sync of pk.
func (e *engine) enqueue(pk parentKey) { e.queue.Add(pk) }

// enqueueForced schedules a sync of pk that calls the hook even when the
// observed state did not change (resyncs).
func (e *engine) enqueueForced(pk parentKey) {
	e.state(pk).forced = true
	e.queue.Add(pk)
}

// MinResyncAfter is the shortest resyncAfterSeconds honoured: a hook
// that answers less is resynced after this long.
const MinResyncAfter = 100 * time.Millisecond

// MaxResyncAfter caps resyncAfterSeconds (a longer wait is a resync in a
// year).
const MaxResyncAfter = 365 * 24 * time.Hour

// resyncDuration converts the hook's resyncAfterSeconds (a float, > 0) to
// a duration without overflowing: values beyond MaxResyncAfter are capped.
func resyncDuration(seconds float64) time.Duration {
	if seconds >= MaxResyncAfter.Seconds() {
		return MaxResyncAfter
	}
	return time.Duration(seconds * float64(time.Second))
}

// resyncAfter schedules a sync of pk that calls the hook after d (the
// hook's resyncAfterSeconds, at least MinResyncAfter). The latest request
// replaces earlier ones; the queue holds one entry per parent, so
// repeated answers do not pile up.
func (e *engine) resyncAfter(pk parentKey, d time.Duration) {
	if d < MinResyncAfter {
		d = MinResyncAfter
	}
	if d > MaxResyncAfter {
		d = MaxResyncAfter
	}
	st := e.state(pk)
	e.mu.Lock()
	st.resyncAt = time.Now().Add(d)
	e.mu.Unlock()
	e.queue.AddAfter(pk, d)
}

// takeForced reports whether this sync of pk must call the hook even if
// the observed state did not change (a resync is due), and clears the
// request. A resyncAfter still in the future is scheduled again: the queue
// may have kept an earlier entry of the same parent instead of it.
func (e *engine) takeForced(pk parentKey, st *parentState) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	forced := st.forced
	st.forced = false
	if !st.resyncAt.IsZero() {
		if wait := time.Until(st.resyncAt); wait > 0 {
			e.queue.AddAfter(pk, wait)
		} else {
			st.resyncAt = time.Time{}
			forced = true
		}
	}
	return forced
}

// maxQuickFollowUps is how many syncs in a row that each wrote something
// (the parent's status, labels, annotations or finalizers, a child or an
// attachment) are followed up at once. A hook whose answers converge
// stops writing within a few rounds (create the children, then report
// them in the status); one whose answers change on every call (a timestamp
// in its status, a counter in a child) would be called in a hot loop.
const maxQuickFollowUps = 8

// Delays of the follow-ups of a sync streak beyond maxQuickFollowUps: the
// first one waits unsettledBackoffBase, each next one twice as long as
// the last, at most unsettledBackoffMax.
const (
	unsettledBackoffBase = time.Second
	unsettledBackoffMax  = 2 * time.Minute
)

// EventStatusNotSettling is the reason of the Warning Event recorded on a
// parent (or decorated object) whose hook's answers wrote something on
// more than maxQuickFollowUps syncs in a row.
const EventStatusNotSettling = "StatusNotSettling"

// unsettledDelay is the delay of the follow-up of the n-th sync in a row
// that wrote something (0: at once): 0 up to maxQuickFollowUps, then
// unsettledBackoffBase doubling up to unsettledBackoffMax.
func unsettledDelay(n int) time.Duration {
	if n <= maxQuickFollowUps {
		return 0
	}
	d := unsettledBackoffBase
	for i := maxQuickFollowUps + 1; i < n && d < unsettledBackoffMax; i++ {
		d *= 2
	}
	return min(d, unsettledBackoffMax)
}

// settleFollowUp decides how a sync of parent whose writes were w is
// followed up (followUp: the sync asks for one). It counts the syncs in a
// row that wrote anything and were followed up; a sync that writes
// nothing, or that records the progress of a rolling update (a
// ControllerRevision write), ends the streak. Up to maxQuickFollowUps of
// them are followed up at once (now: once the events of the writes have
// arrived); beyond, the follow-up comes after unsettledDelay (after, for
// track's function), so a hook whose answers never settle is called at a
// falling rate instead of in a loop, and one that settles late still gets
// there. Changes of what the parent observes still sync it at once. A
// Warning Event (EventStatusNotSettling) says so once per streak. A sync
// that failed (failed) is retried with the failure backoff instead of a
// delayed follow-up (after is 0).
func (e *engine) settleFollowUp(pk parentKey, parent *unstructured.Unstructured, w writes, followUp, failed bool) (now bool, after time.Duration) {
	st := e.state(pk)
	progress := false
	for ref := range w {
		if ref.gvk == controllerRevisionGVK {
			progress = true
		}
	}
	e.mu.Lock()
	if !followUp || len(w) == 0 || progress {
		st.unsettled = 0
		e.mu.Unlock()
		return followUp, 0
	}
	st.unsettled++
	n := st.unsettled
	e.mu.Unlock()
	d := unsettledDelay(n)
	if d == 0 {
		return true, 0
	}
	if n == maxQuickFollowUps+1 {
		e.log.Info("the hook's answers write something at every sync; following up on its writes with a growing delay until a sync writes nothing", "parent", pk.String(), "syncs", n)
		e.warn(parent, EventStatusNotSettling, "Sync",
			"the hook's answers wrote to this object or its children on each of the last %d syncs (e.g. a timestamp in its status or a counter in a child); "+
				"the syncs that follow up on its writes are now delayed, from %s doubling up to %s, until a sync writes nothing",
			n, unsettledBackoffBase, unsettledBackoffMax)
	}
	if failed {
		return false, 0
	}
	e.log.V(1).Info("answers not settling; follow-up delayed", "parent", pk.String(), "syncs", n, "delay", d.String())
	return false, d
}

// observed routes an event that concerns pk through the expectations.
func (e *engine) observed(pk parentKey, obj *unstructured.Unstructured, deleted bool) {
	if e.exp.observe(pk, obj, deleted) != ignore {
		e.enqueue(pk)
	}
}

// track opens the expectations of a sync of pk; the returned function
// closes them with the sync's writes and schedules the follow-up: now
// (followUp, once the events of the writes have arrived), after the
// delay after (settleFollowUp; a sync then still waiting for those events
// is skipped and happens when they arrive), or, when neither, after the
// expectations expire if their events never come.
func (e *engine) track(pk parentKey) func(w writes, followUp bool, after time.Duration) {
	e.exp.begin(pk)
	return func(w writes, followUp bool, after time.Duration) {
		resync, waiting := e.exp.finish(pk, w, followUp)
		switch {
		case resync:
			e.enqueue(pk)
		case after > 0:
			// Not with the timer below too: the queue keeps the earlier
			// of two, which would cut a longer delay short.
			e.queue.AddAfter(pk, after)
		case waiting:
			e.log.V(2).Info("awaiting the events of our writes", "parent", pk.String(), "writes", e.exp.waitingFor(pk))
			e.queue.AddAfter(pk, expectationTimeout+time.Second)
		}
	}
}

// InformerSyncTimeout bounds how long a controller's start waits for the
// informer of one of its kinds to deliver its initial list (a kind the
// manager may not list, a list that keeps failing): the start then fails
// and is retried with backoff instead of holding a start worker.
const InformerSyncTimeout = time.Minute

// watch starts a watch of gvk and keeps it for stop. path is the spec
// path of the resource rule it serves ("spec.parentResource",
// "spec.childResources[1]", ...), which prefixes its errors; the kinds of
// the watches with a path must stay served while the controller runs
// (served). Related kinds are watched with path "": they are watched from
// the workers, when a parent's customize answer names them, and a sync
// that cannot read one fails and is retried on its own. The wait for the
// informer's initial list ends after InformerSyncTimeout (a StartFailed
// error) or as soon as the informer's list answers 404 Not Found (a
// KindNotFound error), both retryable; an informer that synced before
// but whose kind is not served now is also KindNotFound.
func (e *engine) watch(ctx context.Context, path string, gvk schema.GroupVersionKind, fn eventFunc) (*watch, error) {
	prefix := func(err error) error {
		if path == "" {
			return err
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	wctx, cancel := informers.UntilSynced(ctx, gvk, InformerSyncTimeout)
	defer cancel()
	w, err := startWatch(wctx, e.cache, gvk, fn, func(err error) error {
		switch cause := context.Cause(wctx); {
		case errors.Is(cause, informers.ErrKindNotServed):
			return kindNotFound(prefix(fmt.Errorf("watching %s: %w", gvk, informers.SyncError(gvk, informers.ErrKindNotServed))))
		case ctx.Err() == nil && errors.Is(cause, context.DeadlineExceeded):
			err = fmt.Errorf("%w (no initial list within %s: may the manager list and watch %s?)", err, InformerSyncTimeout, gvk)
			return startFailed(prefix(informers.SyncError(gvk, err)))
		}
		return startFailed(prefix(err))
	})
	if err != nil {
		return nil, err
	}
	if nerr := informers.NotServed(gvk); nerr != nil {
		// A shared informer that synced before its kind went away.
		w.stop()
		w.release()
		return nil, kindNotFound(prefix(fmt.Errorf("watching %s: %w: %w", gvk, informers.ErrKindNotServed, nerr)))
	}
	e.mu.Lock()
	e.watches = append(e.watches, w)
	if path != "" {
		e.required = append(e.required, requiredKind{path: path, gvk: gvk})
	}
	e.mu.Unlock()
	return w, nil
}

// errNoLongerServed is wrapped by the errors of served.
var errNoLongerServed = errors.New("is no longer served by the API server (its CustomResourceDefinition deleted?); the controller stopped and starts again once it is served")

// requiredKind is a kind the controller cannot run without, with the
// spec path of its resource rule.
type requiredKind struct {
	path string
	gvk  schema.GroupVersionKind
}

// served returns nil while the API server serves every parent and child
// kind of the controller, else a KindNotFound error that names the first
// one it does not serve (its CRD deleted while the controller ran:
// informers.NotServed). Its informer then keeps its last objects and
// retries its list with backoff; the controller has to stop, and starts
// again once the kind is served.
func (e *engine) served() error {
	e.mu.Lock()
	kinds := e.required
	e.mu.Unlock()
	for _, k := range kinds {
		if err := informers.NotServed(k.gvk); err != nil {
			return kindNotFound(fmt.Errorf("%s: %s %w: %w", k.path, k.gvk, errNoLongerServed, err))
		}
	}
	return nil
}

// start waits for the watches to deliver their initial lists, then runs
// the workers until stop.
func (e *engine) start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	e.ctx, e.cancel = ctx, cancel
	for {
		e.mu.Lock()
		all := true
		for _, w := range e.watches {
			if !w.synced() {
				all = false
			}
		}
		e.mu.Unlock()
		if all {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	workers := e.workers
	if workers <= 0 {
		workers = 1
	}
	e.lastCall.Store(time.Now().UnixNano())
	for i := 0; i < workers; i++ {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for e.work(ctx) {
			}
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.releaseAfterLoad(ctx)
	}()
	startedMetrics(e.name, e.syncHook, e.finHook, e.custHook)
	return nil
}

// loadIdle is how long a controller's queue stays empty, with no sync
// running and none calling a hook since, before its initial syncs count as
// done (engine.loadIdle).
const loadIdle = 2 * time.Second

// releaseAfterLoad waits until the controller's initial syncs are done
// (the queue empty, no sync running, none that called a hook for loadIdle
// and none awaiting the events of its writes: every parent synced, the
// follow-ups on its writes too; a pause of the API server's events in the
// middle does not count, nor do the syncs that stop before the hook, such
// as the checks of awaited events that come expectationTimeout after a
// sync)
// and hands the objects its watches
// then hold (parents, children, related objects) to
// procmem.ReleaseAfterLoad, which returns the free heap pages of a large
// initial load to the OS once the process has settled: the hook's
// requests and answers and the writes of thousands of syncs left the
// heap's pages at about twice the live heap. It returns then, or when ctx
// ends.
func (e *engine) releaseAfterLoad(ctx context.Context) {
	t := time.NewTicker(e.loadIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if e.queue.Len() > 0 || e.busy.Load() > 0 || time.Since(time.Unix(0, e.lastCall.Load())) < e.loadIdle || !e.exp.empty() {
			continue
		}
		e.mu.Lock()
		ws := slices.Clone(e.watches)
		e.mu.Unlock()
		n := 0
		for _, w := range ws {
			n += w.index.len()
		}
		e.afterLoad(n, e.log)
		return
	}
}

// every runs fn every period until stop (call it after start).
func (e *engine) every(period time.Duration, fn func()) {
	ctx := e.ctx
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

func (e *engine) work(ctx context.Context) bool {
	pk, shutdown := e.queue.Get()
	if shutdown {
		return false
	}
	e.busy.Add(1)
	defer e.busy.Add(-1)
	defer e.queue.Done(pk)
	err := e.sync(ctx, pk)
	var rq errRequeue
	switch {
	case err == nil:
		e.queue.Forget(pk)
	case errors.As(err, &rq):
		e.queue.Forget(pk)
		e.queue.AddAfter(pk, rq.after)
	case ctx.Err() != nil:
	default:
		e.log.V(1).Info("sync failed, retrying with backoff", "parent", pk.String(), "error", err.Error())
		e.queue.AddRateLimited(pk)
	}
	return true
}

// stop removes the event handlers, stops the workers and drops the
// controller's metric series; it leaves every object alone.
func (e *engine) stop() { e.halt()() }

// halt is stop, except that the shared informers the controller held are
// given back by release, for the caller to call (after a successor took
// them over, so that the kinds both watch are not listed again).
func (e *engine) halt() (release func()) {
	ws := e.stopWatches()
	if e.cancel != nil {
		e.cancel()
	}
	e.queue.ShutDown()
	e.wg.Wait()
	// The workers are done: nothing reads the watched kinds any more.
	// Watches a worker started meanwhile (related kinds) go too.
	late := e.stopWatches()
	forgetMetrics(e.name)
	return func() {
		for _, w := range slices.Concat(ws, late) {
			w.release()
		}
	}
}

// stopWatches removes the event handlers of the controller's watches and
// returns the watches, which it forgets.
func (e *engine) stopWatches() []*watch {
	e.mu.Lock()
	ws := e.watches
	e.watches = nil
	e.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	return ws
}

// fingerprint summarises an observed state: every object by identity and
// resourceVersion, plus flags.
func fingerprint(flags string, objs ...[]*unstructured.Unstructured) string {
	var lines []string
	for _, group := range objs {
		for _, o := range group {
			if o == nil {
				continue
			}
			lines = append(lines, o.GetAPIVersion()+"|"+o.GetKind()+"|"+o.GetNamespace()+"|"+o.GetName()+"|"+string(o.GetUID())+"|"+o.GetResourceVersion())
		}
	}
	sort.Strings(lines)
	h := sha256.New()
	h.Write([]byte(flags))
	for _, l := range lines {
		h.Write([]byte{'\n'})
		h.Write([]byte(l))
	}
	return hex.EncodeToString(h.Sum(nil))
}
