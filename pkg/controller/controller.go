package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
	"github.com/dcontroller/dcontroller/pkg/source"
)

// MaxErrors is how many recent errors a controller keeps.
const MaxErrors = 10

// maxConflictRetries bounds the immediate retries of a write that hit a
// resourceVersion conflict; each retry reads fresh state.
const maxConflictRetries = 5

// ErrPatchTargetMissing is the error of a Patcher write whose target object
// does not exist: a Patcher never creates objects. The write is retried.
var ErrPatchTargetMissing = errors.New("not found: a Patcher target does not create objects")

// Options configure a Controller.
type Options struct {
	// Operator is the name of the operator that holds the controller; it
	// names the API group of the operator's views.
	Operator string
	// Index is the controller's position in spec.controllers (for error paths).
	Index int
	// Client reads and writes the target.
	Client Client
	// ResolveVersion returns the preferred version of a group/kind, for
	// sources and targets that omit it. Required when one does.
	ResolveVersion func(group, kind string) (string, error)
	// Trace, when set, receives each pipeline stage's output delta.
	Trace func(controller, stage string, delta *dbsp.ZSet)
	// Logger receives structured logs.
	Logger logr.Logger
	// Now returns the current time (time.Now when nil).
	Now func() time.Time
	// MaxDeltaEntries bounds the entries one pipeline stage may emit for
	// one source change: a change over it is refused with an error naming
	// the stage, and the controller keeps its previous state (see
	// HandleBatch). 0 means DefaultMaxDeltaEntries, a negative value no
	// bound.
	MaxDeltaEntries int
	// MaxObjectBytes bounds the JSON encoding of a target object (of a
	// Patcher's patch) that the controller writes: a larger one is not sent
	// and its write fails with a RequestEntityTooLarge error. Views are not
	// bounded. 0 means DefaultMaxObjectBytes, a negative value no bound.
	MaxObjectBytes int
	// EvalLimits bound the work of each expression of the pipeline on one
	// document (see pipeline.Options.EvalLimits and expression.Limits; a
	// zero field is expression.DefaultLimits' value, a negative one no
	// bound). A document over them fails to evaluate, like any other
	// evaluation error: it is reported in Errors and PipelineError and the
	// others go through.
	EvalLimits expression.Limits
	// Concurrency is how many target writes of one batch may run at once
	// (1 when 0). Offline runs use 1 so that runs are reproducible.
	Concurrency int
	// OwnerLive reports whether the controller named by an owner annotation
	// value ("<operator>/<controller>") still runs. An Updater does not take
	// over an object that carries the owner annotation of another controller
	// that runs (see OwnerConflictError); it adopts one whose owner is gone.
	// When nil, every other owner counts as running.
	OwnerLive func(owner string) bool
	// Scope, when set, is the set of namespaces this controller may write
	// (a namespace-sharded operator in a ring of managers: the namespaces
	// whose buckets this member holds). Resync looks only at target objects
	// in scope; an output outside it is not written and is reported as an
	// error (its sources are in scope, so the pipeline moved it to another
	// namespace). nil: every namespace.
	Scope func(namespace string) bool
}

// OutOfScopeError is the error of an output that a namespace-sharded
// controller may not write (Options.Scope).
type OutOfScopeError struct {
	Kind string
	Key  object.Key
}

func (e *OutOfScopeError) Error() string {
	return fmt.Sprintf("%s %s is in a namespace this member does not run: with spec.sharding Namespace, every target object must be in the namespace of its sources", e.Kind, e.Key)
}

// Source is a resolved source of a controller.
type Source struct {
	GVK       schema.GroupVersionKind
	Type      opv1a1.SourceType
	Namespace string
	// Selector restricts the source to matching labels; nil matches all.
	Selector labels.Selector
	// Predicate filters update events; nil passes all.
	Predicate source.Predicate
	// Period is the resync period of a Periodic source.
	Period time.Duration
	// Path is the spec path of the source, e.g. spec.controllers[0].sources[1].
	Path string
}

// hasGVK reports whether obj.GroupVersionKind() is gvk (a resolved kind:
// its version has no '/'), without parsing obj's apiVersion.
func hasGVK(obj *unstructured.Unstructured, gvk schema.GroupVersionKind) bool {
	// As GetKind and GetAPIVersion read them: "" when not a string.
	if k, _ := obj.Object["kind"].(string); k != gvk.Kind {
		return false
	}
	av, _ := obj.Object["apiVersion"].(string)
	g, v := len(gvk.Group), len(gvk.Version)
	if g == 0 {
		// "v1" or "/v1"
		return av == gvk.Version || (len(av) == v+1 && av[0] == '/' && av[1:] == gvk.Version)
	}
	return len(av) == g+1+v && av[:g] == gvk.Group && av[g] == '/' && av[g+1:] == gvk.Version
}

// Matches reports whether obj belongs to the source.
func (s *Source) Matches(obj *unstructured.Unstructured) bool {
	if obj == nil || !hasGVK(obj, s.GVK) {
		return false
	}
	if s.Namespace != "" && obj.GetNamespace() != s.Namespace {
		return false
	}
	if s.Selector != nil && !s.Selector.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	return true
}

// Target is a resolved target of a controller.
type Target struct {
	GVK  schema.GroupVersionKind
	Type opv1a1.TargetType
}

// IsView reports whether the target is a view.
func (t Target) IsView() bool { return opv1a1.IsViewGroup(t.GVK.Group) }

// Change is one observed change of an object: Old is nil for a creation, New
// is nil for a deletion. When both are set, source predicates decide whether
// the change passes; when only New is set, it is the latest state.
type Change struct {
	Old, New *unstructured.Unstructured
}

// Controller is one running declarative controller. Its methods are safe for
// concurrent use; changes are processed one batch at a time.
type Controller struct {
	mu      sync.Mutex // serializes batches (HandleBatch, Resync, RetryFailed, Start)
	smu     sync.Mutex // guards targets, failed, errs and counters (writes run concurrently)
	name    string
	owner   string // Owner()
	path    string
	opts    Options
	sources []Source
	target  Target
	pipe    *pipeline.Pipeline
	// patchRecord is the PatchRecordAnnotation key of a Patcher target
	// ("" for the other target types).
	patchRecord string

	inputs []*inputIndex // per source: the documents fed so far
	// targets holds per target key the integrated pipeline output and the
	// state last written (one map rather than two: most keys have both).
	targets map[object.Key]targetState
	failed  map[object.Key]bool // target keys whose last write failed
	// conflicts: target keys owned by another running controller, by owner.
	conflicts map[object.Key]string
	// restores: target keys restored after changes by another writer.
	restores map[object.Key]*restoreState

	errs        []opv1a1.ErrorRecord
	counters    opv1a1.Counters
	pipelineErr error // the error of the last pipeline run, nil when it succeeded
	// refused holds the changes refused for MaxDeltaEntries, until the
	// object changes again.
	refused map[refusal]error
	// unencodable holds the target keys whose output JSON cannot carry (a
	// NaN or ±Inf number), until their output changes; see checkEncodable.
	unencodable map[object.Key]error
	// cancelled is the error of a pipeline run cancelled by its context;
	// the pipeline's state then misses that run's changes and the
	// controller runs no more batches. Guarded by mu.
	cancelled error
}

// New resolves and compiles a controller spec. Errors carry the spec path,
// e.g. `spec.controllers[1].pipeline[2]: unknown pipeline stage "@frobnicate"`.
func New(spec opv1a1.Controller, opts Options) (*Controller, error) {
	path := fmt.Sprintf("spec.controllers[%d]", opts.Index)
	if spec.Name == "" {
		return nil, fmt.Errorf("%s.name: must not be empty", path)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Controller{
		name:    spec.Name,
		owner:   opts.Operator + "/" + spec.Name,
		path:    path,
		opts:    opts,
		targets: map[object.Key]targetState{},
		failed:  map[object.Key]bool{},
		refused: map[refusal]error{},

		unencodable: map[object.Key]error{},
	}
	if len(spec.Sources) == 0 {
		return nil, fmt.Errorf("%s.sources: at least one source is required", path)
	}
	kinds := make([]string, 0, len(spec.Sources))
	for i, s := range spec.Sources {
		spath := fmt.Sprintf("%s.sources[%d]", path, i)
		gvk, err := c.resolve(s.Resource, spath)
		if err != nil {
			return nil, err
		}
		src := Source{GVK: gvk, Type: s.Type, Path: spath}
		if src.Type == "" {
			src.Type = opv1a1.Watcher
		}
		switch src.Type {
		case opv1a1.Watcher, opv1a1.OneShot:
		case opv1a1.Periodic:
			var raw []byte
			if s.Parameters != nil {
				raw = s.Parameters.Raw
			}
			if src.Period, err = source.ParsePeriod(raw, spath+".parameters"); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s.type: unknown source type %q (want Watcher, OneShot or Periodic)", spath, s.Type)
		}
		if s.Namespace != nil {
			src.Namespace = *s.Namespace
		}
		if s.LabelSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
			if err != nil {
				return nil, fmt.Errorf("%s.labelSelector: %w", spath, err)
			}
			src.Selector = sel
		}
		if s.Predicate != nil && len(s.Predicate.Raw) > 0 {
			if src.Predicate, err = source.ParsePredicate(s.Predicate.Raw, spath+".predicate"); err != nil {
				return nil, err
			}
		}
		if src.Type != opv1a1.Periodic {
			// A Periodic source only triggers resyncs; it feeds no objects.
			for _, prev := range c.sources {
				if prev.GVK.Kind == gvk.Kind && prev.Type != opv1a1.Periodic {
					return nil, fmt.Errorf("%s.kind: two sources of kind %q; the @join subject names sources by kind", spath, gvk.Kind)
				}
			}
			kinds = append(kinds, gvk.Kind)
		}
		c.sources = append(c.sources, src)
		c.inputs = append(c.inputs, &inputIndex{})
	}
	tgvk, err := c.resolve(spec.Target.Resource, path+".target")
	if err != nil {
		return nil, err
	}
	c.target = Target{GVK: tgvk, Type: spec.Target.Type}
	if c.target.Type == "" {
		c.target.Type = opv1a1.Updater
	}
	switch c.target.Type {
	case opv1a1.Patcher:
		c.patchRecord = PatchRecordAnnotation(opts.Operator, spec.Name)
	case opv1a1.Updater, opv1a1.Applier:
	default:
		return nil, fmt.Errorf("%s.target.type: unknown target type %q (want Updater, Patcher or Applier)", path, spec.Target.Type)
	}
	var raw any
	if len(spec.Pipeline.Raw) == 0 {
		return nil, fmt.Errorf("%s.pipeline: a pipeline is required", path)
	}
	if err := json.Unmarshal(spec.Pipeline.Raw, &raw); err != nil {
		return nil, fmt.Errorf("%s.pipeline: %w", path, err)
	}
	popts := pipeline.Options{Path: path + ".pipeline", MaxDeltaEntries: limitOf(opts.MaxDeltaEntries, DefaultMaxDeltaEntries),
		EvalLimits: opts.EvalLimits}
	if max := limitOf(opts.MaxObjectBytes, DefaultMaxObjectBytes); max > 0 && !c.target.IsView() && opts.Client != nil {
		c.opts.Client = limitSize(opts.Client, max)
	}
	if opts.Trace != nil {
		name := spec.Name
		popts.Trace = func(stage string, delta *dbsp.ZSet) { opts.Trace(name, stage, delta) }
	}
	p, err := pipeline.Compile(raw, kinds, popts)
	if err != nil {
		return nil, err
	}
	c.pipe = p
	return c, nil
}

func (c *Controller) resolve(r opv1a1.Resource, path string) (schema.GroupVersionKind, error) {
	if r.Kind == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("%s.kind: must not be empty", path)
	}
	if errs := object.ValidateKind(r.Kind, field.NewPath("kind")); len(errs) > 0 {
		return schema.GroupVersionKind{}, fmt.Errorf("%s.%s", path, errs[0].Error())
	}
	if r.APIGroup == nil {
		if c.opts.Operator == "" {
			return schema.GroupVersionKind{}, fmt.Errorf("%s: a view needs an operator name", path)
		}
		gv := opv1a1.ViewGroupVersion(c.opts.Operator)
		if r.Version != nil && *r.Version != gv.Version {
			return schema.GroupVersionKind{}, fmt.Errorf("%s.version: views are served at %s only, got %q", path, gv.Version, *r.Version)
		}
		return gv.WithKind(r.Kind), nil
	}
	gvk := schema.GroupVersionKind{Group: *r.APIGroup, Kind: r.Kind}
	if opv1a1.IsViewGroup(gvk.Group) {
		gvk.Version = opv1a1.Version
		return gvk, nil
	}
	if r.Version != nil && *r.Version != "" {
		gvk.Version = *r.Version
		return gvk, nil
	}
	if c.opts.ResolveVersion == nil {
		return gvk, fmt.Errorf("%s.version: no version given and no way to discover it", path)
	}
	v, err := c.opts.ResolveVersion(gvk.Group, gvk.Kind)
	if err != nil {
		return gvk, fmt.Errorf("%s: %w", path, err)
	}
	gvk.Version = v
	return gvk, nil
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Owner returns the value of the owner annotation this controller puts on
// the native objects it creates: "<operator>/<controller>".
func (c *Controller) Owner() string { return c.owner }

// Sources returns the resolved sources.
func (c *Controller) Sources() []Source { return c.sources }

// Target returns the resolved target.
func (c *Controller) Target() Target { return c.target }

// Errors returns the most recent errors, oldest first.
func (c *Controller) Errors() []opv1a1.ErrorRecord {
	c.smu.Lock()
	defer c.smu.Unlock()
	return append([]opv1a1.ErrorRecord(nil), c.errs...)
}

// Counters returns the work counters.
func (c *Controller) Counters() opv1a1.Counters {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.counters
}

// PipelineError returns the error of the last pipeline run (some input
// objects failed to evaluate) joined with the errors of the changes still
// refused for MaxDeltaEntries and of the outputs not written because JSON
// cannot carry them (see checkEncodable), or nil when there are none.
func (c *Controller) PipelineError() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	if len(c.refused) == 0 && len(c.unencodable) == 0 {
		return c.pipelineErr
	}
	errs := append([]error{c.pipelineErr}, c.refusedErrors()...)
	return errors.Join(append(errs, c.unencodableErrors()...)...)
}

// Pending returns how many target keys wait for a retried write.
func (c *Controller) Pending() int {
	c.smu.Lock()
	defer c.smu.Unlock()
	return len(c.failed)
}

// call runs one target API call and counts it by operation and result. A
// gate in ctx (see RestoreTarget) may hold the call back.
func (c *Controller) call(ctx context.Context, op string, f func() error) error {
	if gate, ok := ctx.Value(gateKey{}).(func() error); ok {
		if err := gate(); err != nil {
			return err
		}
	}
	err := f()
	result := "success"
	if err != nil {
		result = "error"
	}
	TargetWrites.WithLabelValues(c.opts.Operator, c.name, op, result).Inc()
	return err
}

func (c *Controller) recordError(kind string, err error) {
	if err == nil {
		return
	}
	Errors.WithLabelValues(c.opts.Operator, c.name, kind).Inc()
	c.smu.Lock()
	defer c.smu.Unlock()
	c.opts.Logger.Error(err, "controller error")
	c.errs = append(c.errs, opv1a1.ErrorRecord{Time: metav1.NewTime(c.opts.Now().UTC().Truncate(time.Second)), Message: err.Error()})
	if len(c.errs) > MaxErrors {
		c.errs = c.errs[len(c.errs)-MaxErrors:]
	}
}

// Start emits the single empty object of each OneShot source.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled != nil {
		return c.cancelled
	}
	deltas := map[string]*dbsp.ZSet{}
	for _, s := range c.sources {
		if s.Type != opv1a1.OneShot {
			continue
		}
		z := dbsp.NewZSet()
		z.Insert(map[string]any{"apiVersion": s.GVK.GroupVersion().String(), "kind": s.GVK.Kind, "metadata": map[string]any{}}, 1)
		deltas[s.GVK.Kind] = z
	}
	if len(deltas) == 0 {
		return nil
	}
	return c.process(ctx, deltas)
}

// Handle processes one change; see HandleBatch.
func (c *Controller) Handle(ctx context.Context, old, new *unstructured.Unstructured) error {
	return c.HandleBatch(ctx, []Change{{Old: old, New: new}})
}

// HandleBatch never modifies the objects in changes and keeps references to
// them (and to their maps) until they are replaced: callers may pass the
// objects of an informer cache without copying them, as long as nobody
// modifies those. It turns changes into one
// delta per source kind (an update is the old document with weight -1 and
// the new one with +1; objects leaving a source's namespace or selector are
// removals), runs the pipeline once and writes the touched target objects.
// Objects that belong to no source are ignored; the pipeline sees source
// objects without metadata.managedFields. Errors are returned joined and recorded in
// Errors.
//
// A change for which a pipeline stage would emit more than MaxDeltaEntries
// entries is refused: the batch is split until that change is alone, the
// other changes are processed, and for the refused one the pipeline state,
// the input objects and the outputs stay as they were, so later changes
// compute on the last good state. The refusal is returned, recorded in
// Errors and reported by PipelineError until the object changes again.
//
// When ctx ends while the pipeline runs (the operator is deleted or
// replaced), the evaluation in progress stops within about a thousand
// steps (see expression.Budget), nothing is written and the error, which
// wraps ctx's, is returned; the controller is then stopped for good: its
// pipeline state misses the batch, so HandleBatch and Start return that
// error from then on.
func (c *Controller) HandleBatch(ctx context.Context, changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled != nil {
		return c.cancelled
	}
	ran, perrs, werrs := c.handleBatch(ctx, changes, true)
	if !ran {
		return nil
	}
	perr := errors.Join(perrs...)
	c.smu.Lock()
	c.pipelineErr = perr
	c.smu.Unlock()
	return errors.Join(append([]error{perr}, werrs...)...)
}

func (c *Controller) process(ctx context.Context, deltas map[string]*dbsp.ZSet) error {
	out, perr := c.runPipeline(ctx, deltas)
	if c.cancelled != nil {
		return c.cancelled
	}
	c.smu.Lock()
	c.pipelineErr = perr
	c.smu.Unlock()
	var le *pipeline.LimitError
	if errors.As(perr, &le) {
		c.recordError("pipeline", perr)
		return perr
	}
	return errors.Join(append([]error{perr}, c.applyOutput(ctx, out)...)...)
}

// runPipeline runs one incremental pipeline step; errors other than a
// *pipeline.LimitError are recorded. A run cancelled by ctx sets
// c.cancelled and returns its error, unrecorded, and no output.
func (c *Controller) runPipeline(ctx context.Context, deltas map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	start := time.Now()
	out, perr := c.pipe.ProcessContext(ctx, deltas)
	if cerr := ctx.Err(); cerr != nil && errors.Is(perr, cerr) {
		c.cancelled = fmt.Errorf("controller %s stopped: its pipeline run was cancelled: %w", c.name, cerr)
		c.opts.Logger.Info("pipeline run cancelled", "error", perr.Error())
		return nil, c.cancelled
	}
	PipelineSeconds.WithLabelValues(c.opts.Operator, c.name).Observe(time.Since(start).Seconds())
	if out != nil {
		DeltasOut.WithLabelValues(c.opts.Operator, c.name).Add(float64(out.Len()))
	}
	var le *pipeline.LimitError
	if perr != nil && !errors.As(perr, &le) {
		c.recordError("pipeline", perr)
	}
	return out, perr
}

// applyOutput adds the pipeline's output delta to the outputs and writes
// the touched target objects. Removals are added first, so that an updated
// output replaces its old version in place (see outputSet); otherwise the
// order does not matter (Z-set addition commutes), so the delta is walked
// unsorted and only the outputs without a key are ordered, canonically,
// for their errors.
func (c *Controller) applyOutput(ctx context.Context, out *dbsp.ZSet) []error {
	if out == nil {
		return nil
	}
	var keyless []dbsp.Entry
	touched := make(map[object.Key]bool, out.Len())
	for _, removals := range [2]bool{true, false} {
		out.Range(func(doc dbsp.Document, weight int) bool {
			if (weight < 0) != removals {
				return true
			}
			key, err := object.KeyOf(doc)
			if err != nil {
				keyless = append(keyless, dbsp.Entry{Doc: doc, Weight: weight})
				return true
			}
			c.smu.Lock()
			t := c.targets[key]
			t.out.insert(doc, weight)
			c.putTarget(key, t)
			c.smu.Unlock()
			touched[key] = true
			return true
		})
	}
	var errs []error
	slices.SortFunc(keyless, func(a, b dbsp.Entry) int {
		if c := cmp.Compare(min(a.Weight, 0), min(b.Weight, 0)); c != 0 {
			return c
		}
		return dbsp.Compare(a.Doc, b.Doc)
	})
	for _, e := range keyless {
		_, err := object.KeyOf(e.Doc)
		err = fmt.Errorf("%s.pipeline: output %s (a pipeline builds a new object: set metadata.name in its last @project, or start a list-form @project with {\"$.\": \"$.\"} to keep the input object)", c.path, err)
		c.recordError("output", err)
		errs = append(errs, err)
	}
	return append(errs, c.syncAll(ctx, sortedKeys(touched))...)
}

func sortedKeys(m map[object.Key]bool) []object.Key {
	keys := make([]object.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) < 2 {
		return keys
	}
	// By Key.String, each key rendered once.
	strs := make([]string, len(keys))
	idx := make([]int, len(keys))
	for i, k := range keys {
		strs[i], idx[i] = k.String(), i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(strs[a], strs[b]) })
	out := make([]object.Key, len(keys))
	for i, j := range idx {
		out[i] = keys[j]
	}
	return out
}

// sync writes the desired state of one target key, retrying conflicts with
// fresh state; a failure marks the key for RetryFailed. Syncs of different
// keys may run concurrently.
func (c *Controller) sync(ctx context.Context, key object.Key) error {
	_, err := c.syncKey(ctx, key, true)
	return err
}

// syncKey is sync; it reports whether a write was made. recordOutput says
// whether an ambiguous output is recorded as an error (restores do not
// record it again). An owner conflict is not an error: it is kept in
// Conflicts until the object can be written.
func (c *Controller) syncKey(ctx context.Context, key object.Key, recordOutput bool) (bool, error) {
	if c.opts.Scope != nil && !c.opts.Scope(key.Namespace) {
		err := &OutOfScopeError{Kind: c.target.GVK.Kind, Key: key}
		if recordOutput {
			c.recordError("output", err)
		}
		return false, err
	}
	desired, derr := c.desired(key)
	if derr != nil && recordOutput {
		c.recordError("output", derr)
	}
	if !recordOutput {
		derr = nil
	}
	if err := c.checkEncodable(key, desired, recordOutput); err != nil {
		if !recordOutput {
			return false, nil
		}
		return false, errors.Join(derr, err)
	}
	var err error
	var wrote bool
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		wrote, err = c.write(ctx, key, desired)
		var conflict *OwnerConflictError
		if errors.As(err, &conflict) {
			c.setConflict(key, conflict.Owner)
			c.smu.Lock()
			delete(c.failed, key)
			c.smu.Unlock()
			return false, derr
		}
		if errors.Is(err, errRestoreDeferred) {
			return false, err
		}
		if err == nil {
			c.clearConflict(key)
			if wrote {
				c.smu.Lock()
				c.counters.Writes++
				c.smu.Unlock()
			} else {
				TargetSkipped.WithLabelValues(c.opts.Operator, c.name).Inc()
			}
		}
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			break
		}
		// A conflict is retried with fresh state: it is no write error
		// unless the last attempt fails too (counted and recorded below,
		// with its message).
	}
	c.smu.Lock()
	if err == nil {
		delete(c.failed, key)
		c.smu.Unlock()
		return wrote, derr
	}
	c.failed[key] = true
	if ctx.Err() != nil {
		// Shutting down: the write is retried after the next start.
		c.smu.Unlock()
		return false, nil
	}
	c.counters.WriteErrors++
	c.smu.Unlock()
	err = fmt.Errorf("%s.target: %s %s: %w%s", c.path, c.target.GVK.Kind, key, err, invalidNameHint(err))
	c.recordError("write", err)
	return false, errors.Join(derr, err)
}

// syncAll syncs keys, up to Options.Concurrency at a time: that many
// workers take the keys in order (one goroutine per worker, not per key,
// so a large batch does not grow a fresh stack for every write).
func (c *Controller) syncAll(ctx context.Context, keys []object.Key) []error {
	n := min(c.opts.Concurrency, len(keys))
	if n <= 1 {
		var errs []error
		for _, k := range keys {
			if err := c.sync(ctx, k); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
		next atomic.Int64
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := c.sync(ctx, keys[i]); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

func (c *Controller) getWritten(key object.Key) (map[string]any, bool) {
	st, ok := c.getWrittenState(key)
	return st.doc, ok
}

func (c *Controller) getWrittenState(key object.Key) (writtenState, bool) {
	c.smu.Lock()
	defer c.smu.Unlock()
	st := c.targets[key].written
	ok := st.set
	return st, ok
}

// setWritten records what was written for key, without the fields the
// API server owns (object.ServerFields): the resourceVersion an update
// carries is not part of the output, and keeping it would make the next
// comparison find it "dropped" and rewrite the object on the echo of the
// controller's own write.
func (c *Controller) setWritten(key object.Key, v map[string]any) {
	v = stripServerFields(v)
	c.smu.Lock()
	defer c.smu.Unlock()
	t := c.targets[key]
	t.written = writtenState{doc: v, set: true}
	c.targets[key] = t
}

// setWrittenUpdate is setWritten for an Updater: written is the object as
// written (or found to hold the output), output the pipeline output it was
// made of, and record and digest the ManagedMetadataAnnotation value and
// output digest of the write. When written is output but for apiVersion,
// kind, metadata labels and annotations and server fields, which is what a
// write whose object the API server did not default leaves, and carries
// record, only output (shared with the outputs) and digest are kept: what
// update reads of the last write (see writtenRecord), without a copy of
// the object or of its record per target key.
func (c *Controller) setWrittenUpdate(key object.Key, written, output map[string]any, record string, digest uint64) {
	if !writtenIsOutput(written, output) {
		c.setWritten(key, written)
		return
	}
	if rec, _, _ := unstructured.NestedString(written, "metadata", "annotations", ManagedMetadataAnnotation); rec != record {
		c.setWritten(key, written)
		return
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	t := c.targets[key]
	t.written = writtenState{doc: output, digest: digest, isOutput: true, set: true}
	c.targets[key] = t
}

// writtenState is what a controller last wrote for a target key: the
// object as written, without server fields, or, for an Updater (see
// setWrittenUpdate), the pipeline output it was made of and the digest of
// the output recorded with it. Only update reads the second form, and only
// update writes it (a controller's target type does not change).
type writtenState struct {
	doc      map[string]any
	digest   uint64 // with isOutput: the recorded output digest (native targets)
	isOutput bool
	// record is, for a Patcher, the PatchRecordAnnotation value of the
	// last write ("" when none was written).
	record string
	set    bool // something was written (the zero state: nothing)
}

// targetState is what a controller keeps of one target key.
type targetState struct {
	out     outputSet
	written writtenState
}

// putTarget stores the state of key, or drops it when it holds nothing.
// Callers hold smu.
func (c *Controller) putTarget(key object.Key, t targetState) {
	if t.out.empty() && !t.written.set {
		delete(c.targets, key)
		return
	}
	c.targets[key] = t
}

// writtenRecord returns the ManagedMetadataAnnotation value of the last
// write w, "" if none, and the label and annotation keys it lists. record
// and cur are the value and keys of the write being made: when w is an
// output with the same label and annotation keys, the lists are cur's and
// the value is record with w's digest.
func (c *Controller) writtenRecord(w writtenState, record string, cur managedKeys) (string, managedKeys) {
	if !w.isOutput {
		rec, _, _ := unstructured.NestedString(w.doc, "metadata", "annotations", ManagedMetadataAnnotation)
		return rec, keysOfRecord(rec, record, cur)
	}
	meta, _ := w.doc["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	if sameKeys(labels, cur.Labels, false) && sameKeys(anns, cur.Annotations, true) {
		keys := managedKeys{Labels: cur.Labels, Annotations: cur.Annotations}
		if c.target.IsView() {
			return record, keys
		}
		if rec, ok := withDigest(record, w.digest); ok {
			return rec, keys
		}
	}
	m := outputKeys(labels, anns)
	if !c.target.IsView() {
		m.Output = digestHex(w.digest)
	}
	if m.empty() {
		return "", m
	}
	return m.encode(), managedKeys{Labels: m.Labels, Annotations: m.Annotations}
}

// sameKeys reports whether the keys of m are those of the sorted list
// keys; with own, the owner and managed-metadata annotations of m are
// skipped (outputKeys leaves them out).
func sameKeys(m map[string]any, keys []string, own bool) bool {
	n := 0
	for k := range m {
		if own && (k == opv1a1.OwnerAnnotation || k == ManagedMetadataAnnotation) {
			continue
		}
		if _, found := slices.BinarySearch(keys, k); !found {
			return false
		}
		n++
	}
	return n == len(keys)
}

// withDigest returns record, a ManagedMetadataAnnotation value of a native
// target as encode writes it (ending in "output":"<16 hex digits>"}), with
// the digest d instead; ok is false when record does not end so.
func withDigest(record string, d uint64) (string, bool) {
	const field = `"output":"`
	const tail = len(`0123456789abcdef"}`)
	if len(record) < len(field)+tail || record[len(record)-tail-len(field):len(record)-tail] != field || record[len(record)-2:] != `"}` {
		return "", false
	}
	return record[:len(record)-tail] + digestHex(d) + `"}`, true
}

// writtenIsOutput reports whether the written object, without its server
// fields, has exactly the fields of output but for apiVersion, kind and
// metadata labels and annotations, with equal values, so that what
// droppedOutsideMetadataMaps finds dropped since the write is the same for
// either. An output that sets server fields is not.
func writtenIsOutput(written, output map[string]any) bool {
	n := 0
	for k, v := range written {
		switch k {
		case "apiVersion", "kind":
			continue
		case "metadata":
			wm, ok := v.(map[string]any)
			om, ook := output[k].(map[string]any)
			if !ok || !ook || !sameMetadataFields(wm, om) {
				return false
			}
		default:
			ov, ok := output[k]
			if !ok || !dbsp.Equal(v, ov) {
				return false
			}
		}
		n++
	}
	for k := range output {
		switch k {
		case "apiVersion", "kind":
			continue
		}
		n--
	}
	return n == 0
}

// sameMetadataFields compares metadata maps but for labels, annotations
// and, in written, server fields.
func sameMetadataFields(written, output map[string]any) bool {
	n := 0
	for k, v := range written {
		if k == "labels" || k == "annotations" || slices.Contains(object.ServerFields, k) {
			continue
		}
		ov, ok := output[k]
		if !ok || !dbsp.Equal(v, ov) {
			return false
		}
		n++
	}
	for k := range output {
		if k == "labels" || k == "annotations" {
			continue
		}
		n--
	}
	return n == 0
}

func (c *Controller) delWritten(key object.Key) {
	c.smu.Lock()
	defer c.smu.Unlock()
	t := c.targets[key]
	t.written = writtenState{}
	c.putTarget(key, t)
}

// RetryFailed retries the writes that failed; it returns how many still fail.
func (c *Controller) RetryFailed(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.smu.Lock()
	keys := sortedKeys(c.failed)
	c.smu.Unlock()
	errs := c.syncAll(ctx, keys)
	return c.Pending(), errors.Join(errs...)
}

// Resync repairs drift: it rewrites every desired target object whose
// current state differs; for Updater targets that are not views, it
// deletes the objects that carry this controller's owner annotation but are
// no longer in the pipeline output, and for Patcher targets it removes the
// fields the PatchRecordAnnotation of an object lists when the output has
// nothing for that object any more. It never touches objects it did not
// write. Periodic sources and manager starts call it.
func (c *Controller) Resync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	keys := map[object.Key]bool{}
	c.smu.Lock()
	for k, t := range c.targets {
		if !t.out.empty() {
			keys[k] = true
		}
	}
	for k := range c.failed {
		keys[k] = true
	}
	c.smu.Unlock()
	if c.target.Type == opv1a1.Updater && !c.target.IsView() {
		existing, err := c.opts.Client.List(ctx, c.target.GVK)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.target: list %s: %w", c.path, c.target.GVK.Kind, err))
		}
		for _, obj := range existing {
			if c.opts.Scope != nil && !c.opts.Scope(obj.GetNamespace()) {
				// Another member's namespace.
				continue
			}
			if obj.GetAnnotations()[opv1a1.OwnerAnnotation] == c.Owner() {
				keys[object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = true
			}
		}
	}
	if c.target.Type == opv1a1.Patcher {
		// Objects that carry this controller's record, the output for
		// them gone (before a restart, say): the fields it lists go.
		existing, err := c.opts.Client.List(ctx, c.target.GVK)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.target: list %s: %w", c.path, c.target.GVK.Kind, err))
		}
		for _, obj := range existing {
			if c.opts.Scope != nil && !c.opts.Scope(obj.GetNamespace()) {
				continue
			}
			if _, ok := patchRecordOf(obj.Object, c.patchRecord); ok {
				keys[object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = true
			}
		}
	}
	sorted := sortedKeys(keys)
	if c.target.Type != opv1a1.Patcher {
		for _, k := range sorted {
			// Forget what was written so the write compares with the live
			// state (the Updater's record is on the object). A Patcher
			// keeps its record: it knows which fields are its own only
			// from it.
			c.delWritten(k)
		}
	}
	errs = append(errs, c.syncAll(ctx, sorted)...)
	return errors.Join(errs...)
}

// desired returns the one positive-weight output document for key, or nil
// when the output has none.
func (c *Controller) desired(key object.Key) (map[string]any, error) {
	c.smu.Lock()
	o := c.targets[key].out
	c.smu.Unlock()
	if o.empty() {
		return nil, nil
	}
	if o.more == nil {
		if o.one.Weight > 0 {
			return o.one.Doc, nil
		}
		return nil, nil
	}
	var docs []map[string]any
	for _, e := range o.entries() { // deterministic order
		if e.Weight > 0 {
			docs = append(docs, e.Doc)
		}
	}
	if len(docs) == 0 {
		return nil, nil
	}
	doc := docs[len(docs)-1]
	if len(docs) > 1 {
		return doc, fmt.Errorf("%s.pipeline: %d different outputs for %s %s; writing one of them", c.path, len(docs), c.target.GVK.Kind, key)
	}
	return doc, nil
}

// write moves the target object of key to the desired state; it reports
// whether an API call was made.
func (c *Controller) write(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	switch c.target.Type {
	case opv1a1.Patcher:
		return c.patch(ctx, key, desired)
	case opv1a1.Applier:
		if _, offline := c.opts.Client.(interface{ NoServerSideApply() }); offline || c.target.IsView() {
			// Without an API server there is no schema to merge lists by key:
			// apply the fields as a Patcher would.
			return c.patchOrCreate(ctx, key, desired)
		}
		return c.apply(ctx, key, desired)
	default:
		return c.update(ctx, key, desired)
	}
}

func (c *Controller) get(ctx context.Context, key object.Key) (*unstructured.Unstructured, error) {
	existing, err := c.opts.Client.Get(ctx, c.target.GVK, key)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return existing, err
}

// droppedFields reports whether next no longer sets a path prev set (a
// leaf, or a map, empty ones included); the keys in skip are left out at
// the top level.
func droppedFields(prev, next map[string]any, skip ...string) bool {
	for k, v := range prev {
		if slices.Contains(skip, k) {
			continue
		}
		nv, ok := next[k]
		if !ok {
			return true
		}
		sub, isMap := v.(map[string]any)
		nsub, nIsMap := nv.(map[string]any)
		if isMap && nIsMap && droppedFields(sub, nsub) {
			return true
		}
	}
	return false
}

func (c *Controller) update(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	existing, err := c.get(ctx, key)
	if err != nil {
		return false, err
	}
	if desired == nil {
		c.delWritten(key)
		if existing == nil {
			return false, nil
		}
		if !c.target.IsView() && existing.GetAnnotations()[opv1a1.OwnerAnnotation] != c.Owner() {
			// Not ours to delete (it existed before this controller wrote it).
			return false, nil
		}
		if err := c.call(ctx, "delete", func() error { return c.opts.Client.Delete(ctx, c.target.GVK, key) }); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return true, nil
	}
	obj := &unstructured.Unstructured{Object: stripServerFields(desired)}
	obj.SetGroupVersionKind(c.target.GVK)
	// The label and annotation keys the output sets are recorded on the
	// object, so that a later write (of this run or after a restart) removes
	// those the output drops.
	outLabels, err := outputMetadataStrings(obj.Object, "labels")
	if err != nil {
		return false, err
	}
	ann, err := outputMetadataStrings(obj.Object, "annotations")
	if err != nil {
		return false, err
	}
	ann = maps.Clone(ann)
	managed := outputKeys(outLabels, ann)
	var digest uint64
	if !c.target.IsView() {
		// A digest of the output: when the output changed since the
		// recorded write, the record differs and the object is replaced,
		// so fields the output dropped go even after a restart (the API
		// server's defaults make "contains the output" no proof).
		digest = outputDigest(obj.Object)
		managed.Output = digestHex(digest)
	}
	if ann == nil {
		ann = map[string]any{}
	}
	delete(ann, ManagedMetadataAnnotation)
	var record string
	if !managed.empty() {
		record = managed.encode()
		ann[ManagedMetadataAnnotation] = record
	}
	ours := true
	var existingAnns map[string]any
	if existing != nil {
		existingAnns = metadataStrings(existing.Object, "annotations")
	}
	if !c.target.IsView() {
		if existing != nil {
			if owner, _ := existingAnns[opv1a1.OwnerAnnotation].(string); owner != "" && owner != c.Owner() {
				if c.ownerLive(owner) {
					return false, &OwnerConflictError{Kind: c.target.GVK.Kind, Key: key, Owner: owner}
				}
				// The owner is gone: adopt the object, but not its
				// managed keys (they are not this controller's).
				ours = false
				c.opts.Logger.Info("adopting a target object whose owner no longer runs", "kind", c.target.GVK.Kind, "key", key.String(), "owner", owner)
			} else if owner == "" {
				ours = false
			}
		}
		ann[opv1a1.OwnerAnnotation] = c.Owner()
	}
	if len(ann) == 0 {
		ann = nil
	}
	if existing == nil {
		setMetadataMap(obj.Object, "annotations", ann)
		if err := c.call(ctx, "create", func() error { return c.opts.Client.Create(ctx, obj) }); err != nil {
			return false, err
		}
		c.setWrittenUpdate(key, obj.Object, desired, record, digest)
		return true, nil
	}
	// Labels and annotations are merged with what is there; the output wins,
	// and the keys this controller set before and the output no longer sets
	// are removed (known from the last write, or from the object's own
	// record after a restart).
	prev, known := c.getWrittenState(key)
	var prevKeys managedKeys
	var prevRecord string
	if known {
		prevRecord, prevKeys = c.writtenRecord(prev, record, managed)
	}
	if rec, ok := existingAnns[ManagedMetadataAnnotation].(string); ours && ok && (!known || rec != prevRecord) {
		prevKeys = prevKeys.union(parseManagedRecord(rec))
	}
	labels, droppedLabels := mergeManaged(metadataStrings(existing.Object, "labels"), outLabels, prevKeys.Labels)
	anns, droppedAnns := mergeManaged(existingAnns, ann, append(slices.Clip(prevKeys.Annotations), ManagedMetadataAnnotation))
	setMetadataMap(obj.Object, "labels", labels)
	setMetadataMap(obj.Object, "annotations", anns)
	// The API server may add defaults; what matters is that everything the
	// output says is there and nothing written before was dropped since.
	// The object carries the new record (the output wins the merge), so a
	// different record on the existing object answers Contains at once: an
	// output that changed since the last write changed its digest.
	if len(droppedLabels) == 0 && len(droppedAnns) == 0 &&
		(record == "" || existingAnns[ManagedMetadataAnnotation] == record) &&
		object.Contains(existing.Object, obj.Object) &&
		(!known || !droppedOutsideMetadataMaps(prev.doc, obj.Object)) &&
		(known || !c.target.IsView() || object.Equal(withoutMetadata(existing.Object), withoutMetadata(obj.Object))) {
		c.setWrittenUpdate(key, obj.Object, desired, record, digest)
		return false, nil
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	if err := c.call(ctx, "update", func() error { return c.opts.Client.Update(ctx, obj) }); err != nil {
		return false, err
	}
	c.setWrittenUpdate(key, obj.Object, desired, record, digest)
	return true, nil
}

// setMetadataMap sets metadata[field] of doc to m, or removes it when m is
// nil, as Unstructured's SetLabels and SetAnnotations do (m is not copied).
func setMetadataMap(doc map[string]any, field string, m map[string]any) {
	meta, ok := doc["metadata"].(map[string]any)
	if m == nil {
		if ok {
			delete(meta, field)
		}
		return
	}
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	meta[field] = m
}

// droppedOutsideMetadataMaps is droppedFields(prev, next) with
// metadata.labels and metadata.annotations of prev left out: an Updater
// tracks those by key (see ManagedMetadataAnnotation), and a key someone
// else removed is no reason to write.
func droppedOutsideMetadataMaps(prev, next map[string]any) bool {
	meta, ok := prev["metadata"]
	if !ok {
		return droppedFields(prev, next)
	}
	nmeta, ok := next["metadata"]
	if !ok {
		return true
	}
	sub, isMap := meta.(map[string]any)
	nsub, nIsMap := nmeta.(map[string]any)
	if isMap && nIsMap && droppedFields(sub, nsub, "labels", "annotations") {
		return true
	}
	return droppedFields(prev, next, "metadata")
}

// stripServerFields returns doc without the metadata fields the API server
// owns (object.ServerFields). Only the top level and the metadata map are
// copied, the other values are shared with doc: the controller sets only
// top-level and metadata fields on what it writes, and neither modifies
// pipeline outputs nor the documents it records as written.
func stripServerFields(doc map[string]any) map[string]any {
	if doc == nil {
		return nil
	}
	out := maps.Clone(doc)
	if meta, ok := out["metadata"].(map[string]any); ok {
		meta = maps.Clone(meta)
		for _, f := range object.ServerFields {
			delete(meta, f)
		}
		out["metadata"] = meta
	}
	return out
}

// patch applies desired as a JSON merge patch (RFC 7386) and removes the
// leaves the controller owns that desired no longer sets (all of them when
// desired is nil). What it owns is what it recorded at its last write of
// key and, for a Patcher target, what the object's PatchRecordAnnotation
// lists (the union of both), so that a field dropped while the controller
// ran, or before a restart or a Resync, is removed; the patch carries the
// new record. It reports whether an API call was made.
func (c *Controller) patch(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	prevState, known := c.getWrittenState(key)
	if desired == nil && !known && c.patchRecord == "" {
		return false, nil
	}
	prev := prevState.doc
	var patch map[string]any
	if desired != nil {
		patch = stripServerFields(desired)
		delete(patch, "apiVersion")
		delete(patch, "kind")
		if c.patchRecord != "" {
			patch = withoutPatchRecord(patch, c.patchRecord)
		}
	}
	existing, err := c.get(ctx, key)
	if err != nil {
		return false, err
	}
	if existing == nil {
		c.delWritten(key)
		if desired == nil {
			return false, nil
		}
		return false, ErrPatchTargetMissing
	}
	var hadRecord bool
	if c.patchRecord != "" {
		var rec string
		rec, hadRecord = patchRecordOf(existing.Object, c.patchRecord)
		if hadRecord && (!known || rec != prevState.record) {
			if recorded, err := parsePatchRecord(rec); err != nil {
				c.opts.Logger.Info("ignoring a malformed Patcher record on a target object", "kind", c.target.GVK.Kind, "key", key.String(), "annotation", c.patchRecord, "error", err.Error())
			} else {
				prev = unionLeaves(prev, recorded)
			}
		}
	}
	if desired == nil && len(prev) == 0 && !hadRecord {
		c.delWritten(key)
		return false, nil
	}
	full := object.RemovalPatch(prev, patch)
	var owned map[string]any
	var record string
	if desired != nil {
		// Only what the patch changes (or changed before) is ours to remove.
		owned = object.OwnedLeaves(existing.Object, patch, prev)
		if c.patchRecord != "" {
			record = encodePatchRecord(owned)
		}
	}
	if c.patchRecord != "" && !setPatchRecord(full, c.patchRecord, record, hadRecord) {
		// The output replaces metadata.annotations with a null: the record
		// goes with every other annotation; it is kept in memory only.
		record = ""
		c.opts.Logger.V(1).Info("a Patcher output that removes metadata.annotations keeps no record on the object", "kind", c.target.GVK.Kind, "key", key.String())
	}
	done := func() {
		if desired == nil {
			c.delWritten(key)
		} else {
			c.setPatched(key, owned, record)
		}
	}
	if !object.MergePatchChanges(existing.Object, full) {
		done()
		return false, nil
	}
	b, err := json.Marshal(full)
	if err != nil {
		return false, err
	}
	if err := c.call(ctx, "patch", func() error { return c.opts.Client.Patch(ctx, c.target.GVK, key, b) }); err != nil {
		// What was owned stays recorded (in memory, and on the object
		// unless the patch went through after all): the retry removes it.
		c.setPatched(key, prev, prevState.record)
		return false, err
	}
	done()
	return true, nil
}

// setPatched records, for key, the leaves a patch owns (owned, see
// object.OwnedLeaves) and the PatchRecordAnnotation value written with it.
func (c *Controller) setPatched(key object.Key, owned map[string]any, record string) {
	c.smu.Lock()
	defer c.smu.Unlock()
	t := c.targets[key]
	t.written = writtenState{doc: owned, record: record, set: true}
	c.targets[key] = t
}

func (c *Controller) patchOrCreate(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	if desired != nil {
		existing, err := c.get(ctx, key)
		if err != nil {
			return false, err
		}
		if existing == nil {
			obj := &unstructured.Unstructured{Object: stripServerFields(desired)}
			obj.SetGroupVersionKind(c.target.GVK)
			if err := c.call(ctx, "create", func() error { return c.opts.Client.Create(ctx, obj) }); err != nil {
				return false, err
			}
			patch := stripServerFields(desired)
			delete(patch, "apiVersion")
			delete(patch, "kind")
			c.setWritten(key, patch)
			return true, nil
		}
	}
	return c.patch(ctx, key, desired)
}

func (c *Controller) apply(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	prev, _ := c.getWritten(key)
	if desired == nil && prev == nil {
		return false, nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if desired != nil {
		obj.Object = stripServerFields(desired)
	}
	obj.SetGroupVersionKind(c.target.GVK)
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	if desired != nil {
		existing, err := c.get(ctx, key)
		if err != nil {
			return false, err
		}
		if existing != nil && object.Contains(existing.Object, obj.Object) && (prev == nil || !droppedFields(prev, obj.Object)) {
			c.setWritten(key, obj.Object)
			return false, nil
		}
	}
	// Applying only the identity releases every field this manager owned.
	if err := c.call(ctx, "apply", func() error { return c.opts.Client.Apply(ctx, obj, FieldManager(c.opts.Operator)) }); err != nil {
		if desired == nil && apierrors.IsNotFound(err) {
			c.delWritten(key)
			return false, nil
		}
		return false, err
	}
	if desired == nil {
		c.delWritten(key)
	} else {
		c.setWritten(key, obj.Object)
	}
	return true, nil
}

// FieldManager is the server-side apply field manager of an operator's
// Applier targets.
func FieldManager(operator string) string { return "dcontroller-" + operator }

// NamespaceLocal reports whether the controller's pipeline never combines
// objects of two namespaces (pipeline.Pipeline.NamespaceLocal), as a
// namespace-sharded operator needs; the error names the stage.
func (c *Controller) NamespaceLocal() error { return c.pipe.NamespaceLocal() }
