package operator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/procmem"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/informers"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/sharding"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// Condition reasons of a controller's Ready condition.
const (
	ReasonReady       = "Ready"
	ReasonInvalidSpec = "InvalidSpec"
	ReasonStartFailed = "StartFailed"
	ReasonWriteFailed = "WriteFailed"
	ReasonForbidden   = "Forbidden"
	// ReasonPipelineError: the last pipeline run failed for some objects.
	ReasonPipelineError = "PipelineError"
	// ReasonKindNotFound: a source or target kind is not served (yet).
	ReasonKindNotFound = "KindNotFound"
	// ReasonStarting: the controller's first start is under way, e.g.
	// waiting (up to InformerSyncTimeout) for the informer of a source or
	// of the target to deliver its initial list. If the start then fails,
	// the reason turns to StartFailed (or Forbidden, KindNotFound) and the
	// start is retried with backoff.
	ReasonStarting = "Starting"
)

// InformerSyncTimeout bounds the wait for a new informer's initial list.
const InformerSyncTimeout = time.Minute

// WriteConcurrency is how many target writes a controller issues at once.
const WriteConcurrency = 8

// maxBatch bounds how many queued changes a controller processes in one
// pipeline run.
const maxBatch = 512

// RuntimeOptions configure a Runtime.
type RuntimeOptions struct {
	// Cache provides the shared informers of native kinds: one informer per
	// kind, shared by every controller of every operator. Nil in standalone
	// mode, where every kind lives in Views.
	Cache cache.Cache
	// Client writes native kinds; its reads of unstructured objects should be
	// served from Cache.
	Client client.Client
	// APIReader reads from the API server itself, for what the cache drops
	// (metadata.managedFields, which the hand-off of a target's
	// externalFields reads). When nil, Client's reads are used.
	APIReader client.Reader
	// RESTMapper discovers the version of sources and targets that omit it.
	RESTMapper meta.RESTMapper
	// Discovery says which target kinds have the status subresource (with
	// RESTMapper); when nil, none has (the status is written with the
	// object).
	Discovery StatusDiscovery
	// Views holds the views of all operators (and, standalone, every object).
	// A new store is made when nil.
	Views *view.Store
	// Logger receives structured logs.
	Logger logr.Logger
	// MaxDeltaEntries is the default bound of the entries one pipeline
	// stage may emit for one change, for operators without
	// spec.limits.maxDeltaEntries (see controller.Options).
	MaxDeltaEntries int
	// MaxObjectBytes bounds the encoded size of a target object (see
	// controller.Options).
	MaxObjectBytes int
	// EvalLimits bound the work of each pipeline expression on one
	// document (see controller.Options; zero fields: the defaults of
	// expression.DefaultLimits). An evaluation in progress stops when its
	// operator is deleted or replaced.
	EvalLimits expression.Limits
	// KindLimits bound the targets of one controller and the view kinds
	// of one operator (see controller.KindLimitErrors; zero fields: the
	// defaults). A controller over them is InvalidSpec and its operator's
	// other controllers run.
	KindLimits controller.KindLimits
	// Ring, when set, is this manager's share of the work in a ring of
	// active managers: an operator with spec.sharding Namespace runs here
	// over the namespaces whose buckets Ring holds (the Reconciler restarts
	// it when they change). nil: every namespace.
	Ring *sharding.Ring
	// Dynamic, when set, starts the server-side sharded informers of
	// namespace-sharded operators (see startShardedSource).
	Dynamic dynamic.Interface
}

// Runtime runs operators against a cluster. Starting, updating and deleting
// one operator never disturbs the others: starts and stops of one operator
// name are serialized, those of different names run concurrently, and no
// call waits for another operator's informers (see Upsert).
type Runtime struct {
	opts     RuntimeOptions
	views    *view.Store
	ownViews bool // views was made by NewRuntime
	kube     controller.Client

	// mu guards operators, slots and opts.Ring. It is held only briefly:
	// never while waiting for the API server, an informer or an operator's
	// goroutines.
	mu        sync.Mutex
	operators map[string]*running
	// slots serializes the starts and stops of each operator name.
	slots map[string]*slot
	// live names the controllers of the running operators, for owner
	// checks made while mu is held.
	live liveSet
	// received counts what the manager's informers received (NewManager).
	received *watchCounter
	// shardProbe keeps serverSharding's answers.
	shardProbeMu sync.Mutex
	shardProbe   map[schema.GroupVersionResource]bool
}

// WatchEvents returns how many objects the informers of the manager this
// Runtime was built with (NewManager) received from the API server: list
// items and watch events, of every kind. 0 for a Runtime built otherwise.
func (r *Runtime) WatchEvents() int64 {
	if r.received == nil {
		return 0
	}
	return r.received.n.Load()
}

// NewRuntime returns a Runtime; call Upsert to run operators.
func NewRuntime(opts RuntimeOptions) *Runtime {
	r := &Runtime{opts: opts, views: opts.Views, operators: map[string]*running{}, slots: map[string]*slot{}}
	if r.views == nil {
		r.views, r.ownViews = view.NewStore(), true
	}
	views.add(r.views)
	if opts.Client != nil {
		r.kube = kubeClient{c: opts.Client, live: opts.APIReader}
	}
	return r
}

// KindLimits returns the limits on the kinds of one operator the runtime
// applies (RuntimeOptions.KindLimits, as set: zero fields are the
// defaults).
func (r *Runtime) KindLimits() controller.KindLimits { return r.opts.KindLimits }

// Views returns the view store.
func (r *Runtime) Views() *view.Store { return r.views }

// slot serializes the starts and stops of one operator name: Upsert,
// Delete and Stop take turns, in the order they were called (they enter
// the queue under Runtime.mu), and the one whose turn it is starts or stops
// the operator's controllers (which may wait for informers, up to
// InformerSyncTimeout, or for the controllers' goroutines to end). Every
// field is guarded by Runtime.mu.
type slot struct {
	turn *sync.Cond // on Runtime.mu; signalled when serving advances
	// next is the ticket of the next caller to enter, serving that of the
	// caller whose turn it is.
	next, serving uint64
	// refs counts the callers in the queue (served or waiting); the slot
	// is dropped when it falls to 0.
	refs int
	// stopping counts the Delete and Stop calls in the queue; upserts
	// counts the Upserts in the queue by generation. An Upsert whose turn
	// comes while a later call will replace what it starts (a Delete, a
	// Stop, an Upsert of another generation or of generation 0) starts
	// the operator with a cancelled context: it waits for nothing.
	stopping int
	upserts  map[int64]int
}

// queueLocked queues a caller in name's slot and returns the slot and the
// caller's ticket; register counts the caller in the slot's counters
// (stopping, upserts). The caller holds r.mu; it then waits for its turn
// (waitTurnLocked), starts or stops the operator and calls releaseSlot.
func (r *Runtime) queueLocked(name string, register func(*slot)) (*slot, uint64) {
	s := r.slots[name]
	if s == nil {
		s = &slot{turn: sync.NewCond(&r.mu), upserts: map[int64]int{}}
		r.slots[name] = s
	}
	s.refs++
	register(s)
	ticket := s.next
	s.next++
	return s, ticket
}

// waitTurnLocked waits until it is ticket's turn in s, releasing r.mu
// meanwhile. The caller holds r.mu, and holds it again on return.
func (s *slot) waitTurnLocked(ticket uint64) {
	for s.serving != ticket {
		s.turn.Wait()
	}
}

// supersededLocked reports whether a call queued after the Upsert of
// generation, whose turn it is (and which no longer counts in upserts),
// replaces what that Upsert would start. The caller holds r.mu.
func (s *slot) supersededLocked(generation int64) bool {
	if s.stopping > 0 {
		return true
	}
	for g, n := range s.upserts {
		if n > 0 && (g != generation || g == 0) {
			return true
		}
	}
	return false
}

// releaseSlot ends the caller's turn in name's slot s and passes it to the
// next caller.
func (r *Runtime) releaseSlot(name string, s *slot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.serving++
	s.turn.Broadcast()
	if s.refs--; s.refs == 0 {
		delete(r.slots, name)
	}
}

type running struct {
	// mu guards ctrls, invalid, reasons, since and starting: Status reads
	// them while the operator starts.
	mu         sync.Mutex
	name       string
	generation int64
	ctx        context.Context
	cancel     context.CancelFunc
	done       sync.WaitGroup
	ctrls      []*runningController
	loaded     atomic.Int64      // source objects the controllers' initial runs read
	invalid    map[string]error  // controller name -> compile/start error
	reasons    map[string]string // controller name -> condition reason of invalid
	order      []string          // controller names in spec order; fixed
	since      map[string]metav1.Time
	// starting holds the controllers whose first start is under way
	// (ReasonStarting), with what the start waits for ("" when nothing
	// in particular).
	starting map[string]string
	// maxDeltaEntries is the operator's bound of a stage's entries per change.
	maxDeltaEntries int
	// scope is the namespaces this member runs a namespace-sharded
	// operator over (nil: all; see RuntimeOptions.Ring).
	scope func(namespace string) bool
	// staleViews holds, by view kind, the objects the Updaters of the
	// previous generation wrote into the operator's views; sweepViews
	// deletes those no controller of this generation writes. Guarded by mu.
	staleViews map[schema.GroupVersionKind]map[object.Key]bool
}

// inScope reports whether obj's namespace is one the operator runs over
// here.
func (run *running) inScope(obj metav1.Object) bool {
	return run.scope == nil || run.scope(obj.GetNamespace())
}

type itemKey struct {
	gvk   schema.GroupVersionKind
	key   object.Key
	retry bool // retry failed target writes
	// target: an object of key of this target changed; check it and
	// restore it (nil: a source object).
	target *controller.Target
}

type runningController struct {
	// name is the controller's name in the operator's status
	// (controllerName).
	name  string
	c     *controller.Controller
	queue workqueue.TypedRateLimitingInterface[itemKey]
	stop  []func()
	// release gives back the informers the controller holds
	// (informers.Acquire), once its goroutines have ended.
	release []func()
	// sharded holds the server-side sharded informers of the sources of a
	// namespace-sharded operator (startShardedSource), by kind.
	sharded map[schema.GroupVersionKind]*shardedSource
}

// releaseInformers gives back the informers the controller holds; call it
// once nothing of the controller reads them any more.
func (rc *runningController) releaseInformers() {
	for _, f := range rc.release {
		f()
	}
	rc.release = nil
}

// Upsert starts the operator, or restarts its controllers when the spec's
// generation differs from the running one (or is 0). Controllers that do
// not compile are reported in the status as Ready=False; the others run.
// It reports whether the operator was (re)started: false when the running
// (or starting) operator already has op's generation and was not cancelled
// (see Cancel), and false when this start was cancelled before it ended.
//
// Upsert returns once every controller's first start attempt ended: it
// runs, or it failed and is retried with backoff in the background. An
// attempt may wait up to InformerSyncTimeout for the informer of a native
// source or target to sync. Meanwhile the operator is listed by Names and
// Status reports its controllers that are still starting as Ready=False
// with reason Starting; other operators start, stop and report their
// status without waiting for it. Starts and stops of one operator name are
// serialized: a Delete, a Stop or an Upsert of another generation cancels
// the start under way (its informer waits end at once) and runs after it.
// ctx bounds the life of the operator's controllers.
func (r *Runtime) Upsert(ctx context.Context, op *opv1a1.Operator) bool {
	r.mu.Lock()
	if cur, ok := r.operators[op.Name]; ok {
		if sameGeneration(cur, op) {
			// No call queued before this one replaces it: each cancels
			// the operator it will replace, or makes it start cancelled.
			r.mu.Unlock()
			return false
		}
		// Superseded: end its start (or its run) now rather than after
		// its informer waits.
		cur.cancel()
	}
	s, ticket := r.queueLocked(op.Name, func(s *slot) { s.upserts[op.Generation]++ })
	defer r.releaseSlot(op.Name, s)
	s.waitTurnLocked(ticket)
	if s.upserts[op.Generation]--; s.upserts[op.Generation] == 0 {
		delete(s.upserts, op.Generation)
	}
	cur, ok := r.operators[op.Name]
	if ok && sameGeneration(cur, op) {
		// It runs (or starts) this generation already.
		r.mu.Unlock()
		return false
	}
	run := r.newRunningLocked(ctx, op)
	if s.supersededLocked(op.Generation) {
		// A later call replaces it: start nothing that waits.
		run.cancel()
	}
	r.operators[op.Name] = run
	r.mu.Unlock()
	if ok {
		// The previous generation's informers are given back once the new
		// one holds its own: the kinds both watch are not listed again.
		release := r.stop(cur, false, false)
		defer release()
		run.mu.Lock()
		run.staleViews = writtenViews(cur)
		run.mu.Unlock()
	}
	r.start(run, op)
	// A start cancelled meanwhile (Delete, Stop, Cancel, another
	// generation) did not start the operator.
	return run.ctx.Err() == nil
}

// writtenViews returns the view objects the Updaters of cur wrote, by
// kind, with those cur was still to sweep (a generation replaced before
// its sweep passes its predecessor's objects on).
func writtenViews(cur *running) map[schema.GroupVersionKind]map[object.Key]bool {
	out := map[schema.GroupVersionKind]map[object.Key]bool{}
	cur.mu.Lock()
	ctrls := cur.ctrls
	for gvk, keys := range cur.staleViews {
		out[gvk] = maps.Clone(keys)
	}
	cur.mu.Unlock()
	for _, rc := range ctrls {
		for _, t := range rc.c.Targets() {
			if !t.IsView() || t.Type != opv1a1.Updater {
				continue
			}
			for _, k := range t.WrittenKeys() {
				if out[t.GVK] == nil {
					out[t.GVK] = map[object.Key]bool{}
				}
				out[t.GVK][k] = true
			}
		}
	}
	return out
}

// sweepViews deletes the view objects the previous generation's Updaters
// wrote (run.staleViews) that no controller of run's generation writes:
// the views then hold what this generation's pipelines compute, as after
// a fresh start, while what they still produce is never removed. A kind is
// swept once every controller of op that writes it runs (its output is
// known); kinds that wait for a controller still starting stay for the
// sweep after its start, and those of an invalid controller for the next
// generation.
func (r *Runtime) sweepViews(run *running, op *opv1a1.Operator) {
	type stale struct {
		gvk schema.GroupVersionKind
		key object.Key
	}
	var drop []stale
	run.mu.Lock()
	if run.ctx.Err() != nil {
		run.mu.Unlock()
		return
	}
	byName := map[string]*runningController{}
	for _, rc := range run.ctrls {
		byName[rc.name] = rc
	}
	for gvk, keys := range run.staleViews {
		var writers []*controller.Target
		ready := true
		for i, spec := range op.Spec.Controllers {
			name := controllerName(i, spec)
			rc := byName[name]
			if rc == nil {
				// One that is still starting or retrying may write the
				// kind; an invalid one keeps what its kind holds until a
				// generation that compiles (an invalid edit destroys
				// nothing downstream).
				if writesViewKind(op.Name, spec, gvk) {
					ready = false
					break
				}
				continue
			}
			for _, t := range rc.c.Targets() {
				if t.GVK.GroupKind() == gvk.GroupKind() {
					writers = append(writers, t)
				}
			}
		}
		if !ready {
			continue
		}
		for key := range keys {
			if !slices.ContainsFunc(writers, func(t *controller.Target) bool { return t.Desires(key) }) {
				drop = append(drop, stale{gvk, key})
			}
		}
		delete(run.staleViews, gvk)
	}
	run.mu.Unlock()
	for _, d := range drop {
		_ = r.views.Delete(d.gvk, d.key)
	}
}

// writesViewKind reports whether the controller spec of operator op may
// write view kind gvk: one of its targets names that kind (compared by
// group and kind; no apiGroup is the operator's own view group).
func writesViewKind(op string, spec opv1a1.Controller, gvk schema.GroupVersionKind) bool {
	for _, t := range spec.AllTargets() {
		group := opv1a1.ViewGroup(op)
		if t.APIGroup != nil {
			group = *t.APIGroup
		}
		if group == gvk.Group && t.Kind == gvk.Kind {
			return true
		}
	}
	return false
}

// sameGeneration reports whether cur runs (or starts) op's generation and
// was not cancelled (Cancel): an Upsert of op is then a no-op.
func sameGeneration(cur *running, op *opv1a1.Operator) bool {
	return cur.generation == op.Generation && op.Generation != 0 && cur.ctx.Err() == nil
}

// Delete stops the operator's controllers and drops its views; a start of
// the operator under way is cancelled first. It returns once the
// controllers stopped. Objects the operator owned may then be adopted by
// the controllers of other operators.
func (r *Runtime) Delete(name string) { r.delete(name, false) }

// Deleted is Delete for an Operator that was deleted (rather than handed
// to another member of a ring): once its controllers stopped, each target
// with deletionPolicy Orphan removes its marks from the objects it wrote
// (controller.Target.Orphan), within controller.OrphanTimeout per target;
// what fails is logged. The objects of the other targets stay as they are.
func (r *Runtime) Deleted(name string) { r.delete(name, true) }

func (r *Runtime) delete(name string, orphan bool) {
	r.mu.Lock()
	cur, ok := r.operators[name]
	if !ok && r.slots[name] == nil {
		r.mu.Unlock()
		return
	}
	if ok {
		cur.cancel()
	}
	s, ticket := r.queueLocked(name, func(s *slot) { s.stopping++ })
	defer r.releaseSlot(name, s)
	s.waitTurnLocked(ticket)
	s.stopping--
	cur, ok = r.operators[name]
	delete(r.operators, name)
	r.mu.Unlock()
	if !ok {
		return
	}
	r.stop(cur, true, orphan)()
	r.mu.Lock()
	defer r.mu.Unlock()
	// Objects the stopped operator owned may now be adopted.
	r.recheckConflictsLocked()
}

// Cancel cancels the context of the named operator if it runs (or starts)
// generation: a start under way ends at once (the controllers whose start
// it cancels turn StartFailed, none is retried) and its controllers stop
// processing changes. It does not wait. The operator stays listed, with
// its views, until Delete or Stop removes it or the next Upsert (of any
// generation) replaces it.
func (r *Runtime) Cancel(name string, generation int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.operators[name]; ok && cur.generation == generation {
		cur.cancel()
	}
}

// SetRing sets RuntimeOptions.Ring; call it before the first Upsert. The
// controllers' writes to the cluster then check the ring's fence
// (sharding.FenceWrites) first.
func (r *Runtime) SetRing(ring *sharding.Ring) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opts.Ring = ring
	if r.opts.Client != nil {
		r.kube = kubeClient{c: sharding.FenceWrites(r.opts.Client, ring), live: r.opts.APIReader}
	}
}

// ByNamespace reports whether the named operator runs (or starts) split by
// namespace (spec.sharding Namespace with RuntimeOptions.Ring set).
func (r *Runtime) ByNamespace(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.operators[name]
	return ok && cur.scope != nil
}

// Names returns the running operators, those still starting included,
// sorted.
func (r *Runtime) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.operators))
	for n := range r.operators {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Stop stops every operator, cancelling the starts under way, and
// unregisters the view store from metrics. It returns once every
// operator's controllers stopped.
func (r *Runtime) Stop() {
	r.mu.Lock()
	views.remove(r.views)
	if r.ownViews {
		// Its history timer would keep the store, and every view object,
		// for HistoryAge after the runtime stops.
		defer r.views.Close()
	}
	type queued struct {
		s      *slot
		ticket uint64
	}
	names := map[string]queued{}
	for n, cur := range r.operators {
		cur.cancel()
		names[n] = queued{}
	}
	// Upserts under way that have not published their operator yet.
	for n := range r.slots {
		names[n] = queued{}
	}
	for n := range names {
		s, ticket := r.queueLocked(n, func(s *slot) { s.stopping++ })
		names[n] = queued{s, ticket}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for n, q := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.releaseSlot(n, q.s)
			r.mu.Lock()
			q.s.waitTurnLocked(q.ticket)
			q.s.stopping--
			cur, ok := r.operators[n]
			delete(r.operators, n)
			r.mu.Unlock()
			if ok {
				r.stop(cur, false, false)()
			}
		}()
	}
	wg.Wait()
}

// stop cancels a running operator and waits for its controllers to end;
// orphan then has the targets with deletionPolicy Orphan remove their
// marks (see Deleted), and dropViews deletes the objects of its views. It
// returns the release of the informers the controllers held
// (informers.Acquire), for the caller to call. It is the caller's turn in
// the slot of cur's name; the caller does not hold r.mu.
func (r *Runtime) stop(cur *running, dropViews, orphan bool) (release func()) {
	r.live.remove(cur.name)
	cur.cancel()
	cur.done.Wait()
	cur.mu.Lock()
	ctrls := cur.ctrls
	cur.mu.Unlock()
	release = func() {
		for _, rc := range ctrls {
			rc.releaseInformers()
		}
	}
	if orphan {
		for _, rc := range ctrls {
			for _, t := range rc.c.Targets() {
				ctx, cancel := context.WithTimeout(context.Background(), controller.OrphanTimeout)
				if err := t.Orphan(ctx); err != nil {
					r.opts.Logger.Error(err, "removing the marks of an orphaned target's objects", "operator", cur.name, "controller", rc.name)
				}
				cancel()
			}
		}
	}
	for _, name := range cur.order {
		controller.DeleteMetrics(cur.name, name)
	}
	if dropViews {
		group := opv1a1.ViewGroup(cur.name)
		for _, gvk := range r.views.Kinds() {
			if gvk.Group != group {
				continue
			}
			for _, obj := range r.views.List(gvk) {
				_ = r.views.Delete(gvk, object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
		}
	}
	r.opts.Logger.Info("operator stopped", "operator", cur.name)
	return release
}

func (r *Runtime) resolveVersion(group, kind string) (string, error) {
	if r.opts.RESTMapper == nil {
		if v, ok := KnownVersions[group]; ok {
			return v, nil
		}
		return "", fmt.Errorf("version: no API discovery; set the version of kind %q in group %q", kind, group)
	}
	m, err := r.opts.RESTMapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind})
	if err != nil {
		return "", &discoveryError{fmt.Errorf("version: discovering kind %q in group %q: %w", kind, group, err)}
	}
	return m.GroupVersionKind.Version, nil
}

// controllerName is the name of controller i of a spec: its own, or
// "controllers[i]" when it has none.
func controllerName(i int, spec opv1a1.Controller) string {
	if spec.Name != "" {
		return spec.Name
	}
	return fmt.Sprintf("controllers[%d]", i)
}

// newRunningLocked returns the record of op, not started: every controller
// is starting. The caller holds r.mu (for opts.Ring).
func (r *Runtime) newRunningLocked(parent context.Context, op *opv1a1.Operator) *running {
	ctx, cancel := context.WithCancel(parent)
	run := &running{name: op.Name, generation: op.Generation, ctx: ctx, cancel: cancel,
		invalid: map[string]error{}, reasons: map[string]string{}, since: map[string]metav1.Time{},
		starting:        map[string]string{},
		maxDeltaEntries: maxDeltaEntries(op, r.opts.MaxDeltaEntries)}
	if op.Spec.Sharding == opv1a1.ShardByNamespace && r.opts.Ring != nil {
		run.scope = r.opts.Ring.Owns
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	for i, spec := range op.Spec.Controllers {
		name := controllerName(i, spec)
		run.order = append(run.order, name)
		run.since[name] = now
		run.starting[name] = ""
	}
	return run
}

// start starts the controllers of run, published in r.operators,
// concurrently, and returns when every first start attempt ended. It is
// the caller's turn in the slot of run's name; the caller does not hold
// r.mu. When run's context ends (Delete, Stop, Cancel, a new generation),
// it returns at once: the controllers being started turn StartFailed, and
// none is retried.
func (r *Runtime) start(run *running, op *opv1a1.Operator) {
	ctx := run.ctx
	log := r.opts.Logger.WithValues("operator", op.Name)
	names := make([]string, 0, len(op.Spec.Controllers))
	for _, spec := range op.Spec.Controllers {
		names = append(names, spec.Name)
	}
	r.live.set(op.Name, names)
	// Every controller's series exist from now on, at 0 and not ready,
	// until stop deletes them.
	for i, spec := range op.Spec.Controllers {
		controller.InitMetrics(op.Name, controllerName(i, spec), targetTypes(spec)...)
	}
	// fail records controller name's failed start (ended now).
	fail := func(name string, err error, reason string) {
		run.mu.Lock()
		defer run.mu.Unlock()
		delete(run.starting, name)
		run.invalid[name], run.reasons[name] = err, reason
		run.since[name] = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	}
	seen := map[string]bool{}
	// Two view kinds with one resource name cannot both be served by the
	// view API server: the controller naming the second one is invalid.
	clashes := controller.ViewKindClashes(op.Name, op.Spec.Controllers, r.opts.Cache == nil)
	// Nor can it serve an unbounded number of them.
	overLimits := controller.KindLimitErrors(op.Name, op.Spec.Controllers, r.opts.KindLimits)
	// The controllers start concurrently: one whose source does not sync
	// holds back none of the others.
	var first sync.WaitGroup
	for i, spec := range op.Spec.Controllers {
		name := controllerName(i, spec)
		if seen[name] {
			fail(name, fmt.Errorf("spec.controllers[%d].name: duplicate controller name %q", i, name), ReasonInvalidSpec)
			continue
		}
		seen[name] = true
		if err := clashes[i]; err != nil {
			log.Error(err, "invalid controller", "controller", name)
			fail(name, err, ReasonInvalidSpec)
			continue
		}
		if err := overLimits[i]; err != nil {
			log.Error(err, "invalid controller", "controller", name)
			fail(name, err, ReasonInvalidSpec)
			continue
		}
		first.Add(1)
		go func() {
			defer first.Done()
			r.startWithRetries(run, op.Name, i, spec, name, fail, func() { r.sweepViews(run, op) }, log)
		}()
	}
	first.Wait()
	if ctx.Err() != nil {
		log.Info("operator stopped while starting")
		return
	}
	r.sweepViews(run, op)
	run.mu.Lock()
	started, waiting := len(run.ctrls), len(run.invalid)
	run.mu.Unlock()
	log.Info("operator started", "controllers", started, "waiting", waiting)
	procmem.ReleaseAfterLoad(int(run.loaded.Load()), log)
}

// startWithRetries makes the first start attempt of controller i (named
// name) of the operator run; when it fails for a reason that may heal, it
// retries with backoff in the background (counted in run.done) until the
// start succeeds or run's context ends. fail records a failed start;
// retried is called after a retry succeeded.
func (r *Runtime) startWithRetries(run *running, opName string, i int, spec opv1a1.Controller, name string, fail func(name string, err error, reason string), retried func(), log logr.Logger) {
	ctx := run.ctx
	if ctx.Err() != nil {
		return
	}
	reason, err := r.startOne(ctx, run, opName, i, spec, log.WithValues("controller", name))
	if err == nil {
		run.mu.Lock()
		delete(run.starting, name)
		run.since[name] = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		run.mu.Unlock()
		controller.SetReady(opName, name, true)
		return
	}
	fail(name, err, reason)
	if reason == ReasonInvalidSpec || ctx.Err() != nil {
		// Invalid, or stopped while starting: nothing to retry.
		return
	}
	// Kinds that are not served yet (a CRD installed later), missing RBAC
	// permissions and failed watches may heal: retry with backoff.
	run.done.Add(1)
	go func() {
		defer run.done.Done()
		delay := RetryInitialDelay
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			reason, err := r.startOne(ctx, run, opName, i, spec, log.WithValues("controller", name))
			if ctx.Err() != nil {
				// Stopped while starting: the record goes with it.
				return
			}
			run.mu.Lock()
			if err == nil {
				delete(run.invalid, name)
				delete(run.reasons, name)
				run.since[name] = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
				run.mu.Unlock()
				controller.SetReady(opName, name, true)
				log.Info("controller started after retry", "controller", name)
				retried()
				return
			}
			run.invalid[name], run.reasons[name] = err, reason
			run.mu.Unlock()
			if reason == ReasonInvalidSpec {
				return
			}
			if delay *= 2; delay > RetryMaxDelay {
				delay = RetryMaxDelay
			}
		}
	}()
}

// setWaiting records what controller name's first start waits for (shown
// in its Starting condition); no-op once that start ended.
func (run *running) setWaiting(name, what string) {
	run.mu.Lock()
	defer run.mu.Unlock()
	if _, ok := run.starting[name]; ok {
		run.starting[name] = what
	}
}

// AccessCheckTimeout bounds the RBAC check of a controller's start; a
// check that runs out of it fails the start, which is retried.
const AccessCheckTimeout = 30 * time.Second

// RetryInitialDelay and RetryMaxDelay bound the backoff of retried
// controller starts.
const (
	RetryInitialDelay = 2 * time.Second
	RetryMaxDelay     = time.Minute
)

// discoveryError marks a failure to discover a kind: it may heal (a CRD
// installed later, an API server back up), so the start is retried.
type discoveryError struct{ err error }

func (e *discoveryError) Error() string { return e.err.Error() }
func (e *discoveryError) Unwrap() error { return e.err }

// startOne compiles, checks and starts one controller; on failure it
// returns the Ready condition's reason: InvalidSpec (permanent), Forbidden,
// KindNotFound or StartFailed (retried).
func (r *Runtime) startOne(ctx context.Context, run *running, opName string, i int, spec opv1a1.Controller, log logr.Logger) (string, error) {
	var rc *runningController
	client := routerClient{views: controller.StoreClient{Store: r.views}, kube: r.kube,
		sharded: func(gvk schema.GroupVersionKind) *shardedSource {
			if rc == nil {
				return nil
			}
			return rc.sharded[gvk]
		}}
	c, err := controller.New(spec, controller.Options{
		Operator: opName, Index: i, Client: client,
		ResolveVersion:  r.resolveVersion,
		HasStatus:       r.hasStatus,
		Logger:          log,
		Concurrency:     WriteConcurrency,
		OwnerLive:       r.ownerLive,
		MaxDeltaEntries: run.maxDeltaEntries,
		MaxObjectBytes:  r.opts.MaxObjectBytes,
		EvalLimits:      r.opts.EvalLimits,
		Scope:           run.scope,
	})
	if err != nil {
		var de *discoveryError
		if errors.As(err, &de) {
			log.Error(err, "kind not found; retrying")
			return ReasonKindNotFound, err
		}
		log.Error(err, "invalid controller")
		return ReasonInvalidSpec, err
	}
	run.setWaiting(controllerName(i, spec), fmt.Sprintf("checking the manager's RBAC access to its sources and targets (SelfSubjectAccessReviews, up to %s)", AccessCheckTimeout))
	actx, cancel := context.WithTimeout(ctx, AccessCheckTimeout)
	err = r.checkAccess(actx, c)
	cancel()
	if err != nil {
		err = fmt.Errorf("spec.controllers[%d].%w", i, err)
		var fe *forbiddenError
		if errors.As(err, &fe) {
			log.Error(err, "controller lacks RBAC permissions; retrying")
			return ReasonForbidden, err
		}
		if kindNotServed(err) {
			log.Error(err, "kind not found; retrying")
			return ReasonKindNotFound, err
		}
		log.Error(err, "checking access failed; retrying")
		return ReasonStartFailed, err
	}
	if run.scope != nil {
		if err := r.checkNamespaceLocal(c, i); err != nil {
			log.Error(err, "invalid controller")
			return ReasonInvalidSpec, err
		}
	}
	rc = &runningController{name: controllerName(i, spec), c: c, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[itemKey]())}
	if err := r.startController(ctx, run, rc); err != nil {
		if ctx.Err() != nil {
			log.Info("controller start cancelled: the operator stopped or changed", "error", err.Error())
		} else {
			log.Error(err, "controller failed to start; retrying")
		}
		for _, f := range rc.stop {
			f()
		}
		rc.queue.ShutDown()
		rc.releaseInformers()
		if kindNotServed(err) {
			return ReasonKindNotFound, err
		}
		return ReasonStartFailed, err
	}
	run.mu.Lock()
	run.ctrls = append(run.ctrls, rc)
	run.mu.Unlock()
	return "", nil
}

// kindNotServed reports whether err says that a kind is not served by the
// API server: the REST mapper knows no such kind or version (a CRD not
// installed, or without that version), or a list answered 404 Not Found.
// Such a start is retried and reported as KindNotFound, not StartFailed.
func kindNotServed(err error) bool {
	var de *discoveryError
	return errors.As(err, &de) || meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}

func (r *Runtime) isView(gvk schema.GroupVersionKind) bool {
	return opv1a1.IsViewGroup(gvk.Group) || r.opts.Cache == nil
}

func (r *Runtime) startController(ctx context.Context, run *running, rc *runningController) error {
	c := rc.c
	var initial []controller.Change
	for _, s := range c.Sources() {
		if s.Type == opv1a1.OneShot || s.Type == opv1a1.Periodic {
			continue
		}
		s := s
		enqueue := func(obj *unstructured.Unstructured) {
			if !run.inScope(obj) {
				return
			}
			rc.queue.Add(itemKey{gvk: s.GVK, key: object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}})
		}
		if r.isView(s.GVK) {
			cancel := r.views.Subscribe(func(ev view.Event) {
				if ev.Object.GroupVersionKind() != s.GVK {
					return
				}
				if ev.Type == view.Modified && s.Predicate != nil && !s.Predicate.Update(ev.Old, ev.Object) {
					return
				}
				enqueue(ev.Object)
			})
			rc.stop = append(rc.stop, cancel)
			for _, obj := range r.views.List(s.GVK) {
				if run.inScope(obj) {
					initial = append(initial, controller.Change{New: obj})
				}
			}
			continue
		}
		var inf eventSource
		var sharded *shardedSource
		if run.scope != nil {
			var err error
			if sharded, err = r.startShardedSource(ctx, s.GVK, s.Namespace); err != nil {
				return fmt.Errorf("%s: watching %s: %w", s.Path, s.GVK, err)
			}
		}
		if sharded != nil {
			if rc.sharded == nil {
				rc.sharded = map[schema.GroupVersionKind]*shardedSource{}
			}
			rc.sharded[s.GVK] = sharded
			inf = sharded.events()
		} else {
			// GetInformer blocks until the informer has synced; bound the
			// wait so that a watch that cannot start is reported instead of
			// hanging. Nothing but this controller's start waits for it.
			run.setWaiting(rc.name, fmt.Sprintf("%s: waiting for the informer of %s to sync (up to %s)", s.Path, s.GVK, InformerSyncTimeout))
			ictx, cancel := informers.UntilSynced(ctx, s.GVK, InformerSyncTimeout)
			ci, release, err := informers.Acquire(ictx, r.opts.Cache, s.GVK)
			cause := context.Cause(ictx)
			cancel()
			rc.release = append(rc.release, release)
			if err != nil {
				if errors.Is(cause, informers.ErrKindNotServed) {
					// Reported as KindNotFound and retried.
					err = &discoveryError{informers.SyncError(s.GVK, informers.ErrKindNotServed)}
				} else if ctx.Err() == nil {
					// Timed out: say why the informer does not sync.
					err = informers.SyncError(s.GVK, err)
				}
				return fmt.Errorf("%s: watching %s: %w", s.Path, s.GVK, err)
			}
			inf = ci
		}
		// The informer replays the objects it holds to a new handler as
		// additions "in the initial list"; the List below reads them (or
		// newer states) after the registration, and a change after it
		// comes as an event, so the replay is skipped: it would queue
		// every object once more (N keys whose queue sets keep their size
		// after they drain) and run each unchanged object through the
		// pipeline again.
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(o any, isInInitialList bool) {
				if isInInitialList {
					return
				}
				if u, ok := o.(*unstructured.Unstructured); ok {
					enqueue(u)
				}
			},
			UpdateFunc: func(o, n any) {
				ou, ok1 := o.(*unstructured.Unstructured)
				nu, ok2 := n.(*unstructured.Unstructured)
				if !ok1 || !ok2 {
					return
				}
				if s.Predicate != nil && !s.Predicate.Update(ou, nu) {
					return
				}
				enqueue(nu)
			},
			DeleteFunc: func(o any) {
				if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if u, ok := o.(*unstructured.Unstructured); ok {
					enqueue(u)
				}
			},
		})
		if err != nil {
			return fmt.Errorf("%s: watching %s: %w", s.Path, s.GVK, err)
		}
		rc.stop = append(rc.stop, func() { _ = inf.RemoveEventHandler(reg) })
		if sharded != nil {
			for _, u := range sharded.list() {
				if run.inScope(u) {
					initial = append(initial, controller.Change{New: u})
				}
			}
			continue
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(s.GVK.GroupVersion().WithKind(s.GVK.Kind + "List"))
		var lopts []client.ListOption
		if s.Namespace != "" {
			lopts = append(lopts, client.InNamespace(s.Namespace))
		}
		// The cache's own objects, not copies: HandleBatch never modifies
		// them and keeps them as its input state, so each object is held
		// once.
		lopts = append(lopts, client.UnsafeDisableDeepCopy)
		if err := r.opts.Cache.List(ctx, l, lopts...); err != nil {
			return fmt.Errorf("%s: listing %s: %w", s.Path, s.GVK, err)
		}
		for i := range l.Items {
			if run.inScope(&l.Items[i]) {
				initial = append(initial, controller.Change{New: &l.Items[i]})
			}
		}
	}
	// The initial state goes through the pipeline in one batch; then the
	// whole target state is reconciled once, which deletes what no longer has
	// a source (only objects this controller wrote).
	run.setWaiting(rc.name, fmt.Sprintf("running the pipeline on the initial state (source objects: %d) and writing its targets", len(initial)))
	_ = c.HandleBatch(ctx, initial)
	run.loaded.Add(int64(len(initial)))
	_ = c.Start(ctx)
	_ = c.ResyncRest(ctx)
	if c.Pending() > 0 {
		rc.queue.AddRateLimited(itemKey{retry: true})
	}
	// Target objects changed by others are restored; registered after the
	// first writes so that the replay of existing objects finds them known.
	if err := r.watchTarget(ctx, run, rc); err != nil {
		return err
	}
	run.done.Add(1)
	go func() {
		defer run.done.Done()
		r.work(ctx, rc)
	}()
	go func() {
		// However the operator stops, its watches and queue go with it.
		<-ctx.Done()
		for _, f := range rc.stop {
			f()
		}
		rc.queue.ShutDown()
	}()
	for _, s := range c.Sources() {
		if s.Type != opv1a1.Periodic {
			continue
		}
		period := s.Period
		run.done.Add(1)
		go func() {
			defer run.done.Done()
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					_ = c.Resync(ctx)
					if c.Pending() > 0 {
						rc.queue.AddRateLimited(itemKey{retry: true})
					}
				}
			}
		}()
	}
	return nil
}

// eventSource is what a controller needs of an informer: the shared
// cache's (controller-runtime's Informer) or a sharded source's.
type eventSource interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error
}

// work drains the controller's queue: it gathers up to maxBatch changed keys,
// reads their latest state and runs the pipeline once over the batch.
func (r *Runtime) work(ctx context.Context, rc *runningController) {
	for {
		first, shutdown := rc.queue.Get()
		if shutdown {
			return
		}
		items := []itemKey{first}
		for len(items) < maxBatch && rc.queue.Len() > 0 {
			it, shutdown := rc.queue.Get()
			if shutdown {
				break
			}
			items = append(items, it)
		}
		var changes []controller.Change
		var targets []itemKey
		retry := false
		for _, it := range items {
			if it.retry {
				retry = true
				continue
			}
			if it.target != nil {
				targets = append(targets, it)
				continue
			}
			obj, err := r.latest(ctx, rc, it.gvk, it.key)
			switch {
			case err == nil:
				changes = append(changes, controller.Change{New: obj})
			case apierrors.IsNotFound(err):
				stub := newObj(it.gvk)
				stub.SetNamespace(it.key.Namespace)
				stub.SetName(it.key.Name)
				changes = append(changes, controller.Change{Old: stub})
			default:
				r.opts.Logger.Error(err, "reading source object", "controller", rc.c.Name(), "kind", it.gvk.Kind, "key", it.key.String())
				rc.queue.AddRateLimited(it)
			}
		}
		if len(changes) > 0 {
			_ = rc.c.HandleBatch(ctx, changes)
		}
		if retry {
			_, _ = rc.c.RetryFailed(ctx)
		}
		for _, it := range targets {
			r.restore(ctx, rc, it)
		}
		for _, it := range items {
			rc.queue.Done(it)
		}
		if ctx.Err() != nil {
			return
		}
		// Failing writes are retried with the queue's exponential backoff
		// (5ms doubling up to 1000s); the backoff resets once all succeed.
		if rc.c.Pending() > 0 {
			if retry || rc.queue.NumRequeues(itemKey{retry: true}) == 0 {
				rc.queue.AddRateLimited(itemKey{retry: true})
			}
		} else {
			rc.queue.Forget(itemKey{retry: true})
		}
	}
}

func (r *Runtime) latest(ctx context.Context, rc *runningController, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	if r.isView(gvk) {
		return r.views.Get(gvk, key)
	}
	if s := rc.sharded[gvk]; s != nil {
		return s.get(gvk, key)
	}
	// The cache's own object, not a copy (see startController's List).
	u := newObj(gvk)
	if err := r.opts.Cache.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, u, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return u, nil
}

// Running returns the names of the controllers of a running operator that
// run: started, whatever their Ready condition says (failing writes, a
// pipeline error, an owner conflict or a contested target are conditions of
// a running controller). The others failed to start (invalid, or retried
// with backoff) or are still starting. ok is false when the operator does
// not run. Running never waits for a start under way.
func (r *Runtime) Running(name string) (map[string]bool, bool) {
	r.mu.Lock()
	run, ok := r.operators[name]
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	out := map[string]bool{}
	for _, rc := range run.ctrls {
		if _, bad := run.invalid[rc.name]; !bad {
			out[rc.name] = true
		}
	}
	return out, true
}

// Status returns the status of a running operator: one entry per controller
// in spec order with a Ready condition, recent errors and counters. A
// controller whose first start is under way is Ready=False with reason
// Starting and a message naming what it waits for. ok is false when the
// operator does not run. Status never waits for a start under way.
func (r *Runtime) Status(name string, generation int64) (opv1a1.OperatorStatus, bool) {
	r.mu.Lock()
	run, ok := r.operators[name]
	r.mu.Unlock()
	if !ok {
		return opv1a1.OperatorStatus{}, false
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	byName := map[string]*runningController{}
	for _, rc := range run.ctrls {
		byName[rc.name] = rc
	}
	var st opv1a1.OperatorStatus
	for _, name := range run.order {
		cs := opv1a1.ControllerStatus{Name: name}
		cond := metav1.Condition{Type: "Ready", ObservedGeneration: generation, LastTransitionTime: run.since[name]}
		if what, starting := run.starting[name]; starting {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonStarting, "Controller is starting"
			if what != "" {
				cond.Message += ": " + what
			}
		} else if err, bad := run.invalid[name]; bad {
			reason := run.reasons[name]
			if reason == "" {
				reason = ReasonInvalidSpec
			}
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, err.Error()
			cs.LastErrors = []opv1a1.ErrorRecord{{Time: run.since[name], Message: err.Error()}}
		} else if rc := byName[name]; rc != nil {
			cs.LastErrors = rc.c.Errors()
			cs.Counters = rc.c.Counters()
			if perr := rc.c.PipelineError(); perr != nil {
				cond.Status, cond.Reason = metav1.ConditionFalse, ReasonPipelineError
				cond.Message = "the last pipeline run failed for some objects: " + perr.Error()
				if len(cond.Message) > 1024 {
					cond.Message = cond.Message[:1021] + "..."
				}
			} else if n := rc.c.Pending(); n > 0 {
				cond.Status, cond.Reason = metav1.ConditionFalse, ReasonWriteFailed
				cond.Message = fmt.Sprintf("%d target write(s) failing", n)
				if len(cs.LastErrors) > 0 {
					cond.Message += ": " + cs.LastErrors[len(cs.LastErrors)-1].Message
				}
			} else if msg := conflictMessage(rc.c); msg != "" {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonOwnerConflict, msg
			} else if msg := contestedMessage(rc.c); msg != "" {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonTargetContested, msg
			} else {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonReady, "Controller is up and running"
			}
		}
		cs.Conditions = []metav1.Condition{cond}
		st.Controllers = append(st.Controllers, cs)
	}
	return st, true
}

// targetTypes returns the types of the controller's targets, in spec order.
func targetTypes(spec opv1a1.Controller) []opv1a1.TargetType {
	var out []opv1a1.TargetType
	for _, t := range spec.AllTargets() {
		out = append(out, t.Type)
	}
	return out
}
