package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
	"github.com/dcontroller/dcontroller/pkg/source"
)

// MaxErrors is how many recent errors a controller keeps.
const MaxErrors = 10

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
	// HasStatus reports whether a target kind (resolved, not a view) has
	// the status subresource, as the API server's discovery says (a
	// "<resource>/status" entry in its API resource list: every CRD with
	// subresources.status and the native kinds with a status). When it
	// does, the status of an output goes to .../status (see
	// Target.Status). When nil, no kind has one: the status is written
	// with the object, as an offline store keeps it. An error fails New
	// (wrapped with the target's path).
	HasStatus func(gvk schema.GroupVersionKind) (bool, error)
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

// Change is one observed change of an object: Old is nil for a creation, New
// is nil for a deletion. When both are set, source predicates decide whether
// the change passes; when only New is set, it is the latest state.
type Change struct {
	Old, New *unstructured.Unstructured
}

// Controller is one running declarative controller: its sources, its
// compiled pipeline and its targets. It turns changes of its sources into
// deltas, runs the pipeline and routes each output delta to the target of
// its name (change.go); how a target writes is the target's own
// (target.go). Its methods are safe for concurrent use; changes are
// processed one batch at a time.
type Controller struct {
	mu    sync.Mutex // serializes batches (HandleBatch, Resync, RetryFailed, Start, restores)
	smu   sync.Mutex // guards errs, counters, pipelineErr and refused
	name  string
	owner string // Owner()
	path  string
	opts  Options
	// fieldManager is FieldManager(opts.Operator), and fieldManagerValue
	// the same as the value a write's context carries (WithFieldManager),
	// made once rather than per write.
	fieldManager      string
	fieldManagerValue any
	sources           []Source
	targets           []*Target // in spec order
	pipe              *pipeline.Pipeline

	inputs []*inputIndex // per source: the documents fed so far

	errs        []opv1a1.ErrorRecord
	counters    opv1a1.Counters // Deltas; the targets count their writes
	pipelineErr error           // the error of the last pipeline run, nil when it succeeded
	// refused holds the changes refused for MaxDeltaEntries, until the
	// object changes again.
	refused map[refusal]error
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
	if err := checkTargets(spec, path); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	logOptions(spec, path, opts.Logger)
	c := &Controller{
		name:         spec.Name,
		owner:        opts.Operator + "/" + spec.Name,
		fieldManager: FieldManager(opts.Operator),
		path:         path,
		opts:         opts,
		refused:      map[refusal]error{},
	}
	c.fieldManagerValue = c.fieldManager
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
		if src.Type == "" || src.Type == opv1a1.Lister {
			// A Lister feeds the full filtered list on each change; the
			// targets are the pipeline on the current objects either way,
			// so it runs as a Watcher.
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
			return nil, fmt.Errorf("%s.type: unknown source type %q (want Watcher, Lister, OneShot or Periodic)", spath, s.Type)
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
	for j, ts := range spec.AllTargets() {
		tpath := path + "." + spec.TargetField(j)
		gvk, err := c.resolve(ts.Resource, tpath)
		if err != nil {
			return nil, err
		}
		name := ts.Name
		if name == "" {
			name = ts.Kind
		}
		t, err := newTarget(c, name, gvk, ts.Type, tpath)
		if err != nil {
			return nil, err
		}
		if err := t.setPolicies(ts); err != nil {
			return nil, err
		}
		c.targets = append(c.targets, t)
	}
	var raw any
	if len(spec.Pipeline.Raw) == 0 {
		return nil, fmt.Errorf("%s.pipeline: a pipeline is required", path)
	}
	// Numbers stay json.Number, so that the expressions tell an integer
	// literal (7) from a float (7.0), as when they parse a spec directly.
	dec := json.NewDecoder(bytes.NewReader(spec.Pipeline.Raw))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s.pipeline: %w", path, err)
	}
	popts := pipeline.Options{Path: path + ".pipeline", MaxDeltaEntries: limitOf(opts.MaxDeltaEntries, DefaultMaxDeltaEntries),
		EvalLimits: opts.EvalLimits, Dialect: DialectOf(spec)}
	for _, t := range c.targets {
		popts.Outputs = append(popts.Outputs, t.Name)
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

// checkTargets checks the shape of the controller's targets: exactly one
// of target and targets, at least one target, and target names (a target's
// name, else its kind) unique within the controller.
func checkTargets(spec opv1a1.Controller, path string) error {
	switch {
	case spec.Target != nil && spec.Targets != nil:
		return fmt.Errorf("%s: both target and targets are set; write one target as target: {...} or several as targets: [{...}, ...], not both", path)
	case spec.Target == nil && len(spec.Targets) == 0:
		return fmt.Errorf("%s: no target; write target: {kind: ...} or targets: [{kind: ...}, ...]", path)
	}
	seen := map[string]int{}
	for j, t := range spec.AllTargets() {
		name := t.Name
		if name == "" {
			name = t.Kind
		}
		if name == "" {
			continue // resolve reports the empty kind
		}
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("%s.%s.name: target name %q is also the name of %s (a target's name defaults to its kind): give one of them another name", path, spec.TargetField(j), name, spec.TargetField(prev))
		}
		seen[name] = j
	}
	return nil
}

// logOptions logs the successor's controller options that are set: they
// are accepted and none applies here (see opv1a1.ControllerOptions).
func logOptions(spec opv1a1.Controller, path string, log logr.Logger) {
	o := spec.Options
	if o == nil {
		return
	}
	for _, f := range []struct {
		set       bool
		name, why string
	}{
		{o.DisableIncrementalizer, "disableIncrementalizer", "pipelines always run incrementally, with the results of a run from scratch"},
		{o.DisableReconciler, "disableReconciler", "each target reconciles the objects it writes with their live state"},
		{o.DisableDistincter, "disableDistincter", "each target object is written from its one output document"},
	} {
		if f.set {
			log.Info("controller option has no effect here", "path", path+".options."+f.name, "reason", f.why)
		}
	}
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

// Targets returns the resolved targets, in spec order.
func (c *Controller) Targets() []*Target { return c.targets }

// Errors returns the most recent errors, oldest first.
func (c *Controller) Errors() []opv1a1.ErrorRecord {
	c.smu.Lock()
	defer c.smu.Unlock()
	return append([]opv1a1.ErrorRecord(nil), c.errs...)
}

// Counters returns the work counters: the changes the controller
// processed, and the writes and write errors of all its targets.
func (c *Controller) Counters() opv1a1.Counters {
	c.smu.Lock()
	n := c.counters
	c.smu.Unlock()
	for _, t := range c.targets {
		tc := t.Counters()
		n.Writes += tc.Writes
		n.WriteErrors += tc.WriteErrors
	}
	return n
}

// PipelineError returns the error of the last pipeline run (some input
// objects failed to evaluate) joined with the errors of the changes still
// refused for MaxDeltaEntries and of the outputs not written because JSON
// cannot carry them (see checkEncodable), or nil when there are none.
func (c *Controller) PipelineError() error {
	var unencodable []error
	for _, t := range c.targets {
		unencodable = append(unencodable, t.unencodableErrors()...)
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	if len(c.refused) == 0 && len(unencodable) == 0 {
		return c.pipelineErr
	}
	errs := append([]error{c.pipelineErr}, c.refusedErrors()...)
	return errors.Join(append(errs, unencodable...)...)
}

// Pending returns how many target keys, of all targets, wait for a
// retried write.
func (c *Controller) Pending() int {
	n := 0
	for _, t := range c.targets {
		n += t.Pending()
	}
	return n
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

// RetryFailed retries the writes that failed, target by target; it returns
// how many still fail.
func (c *Controller) RetryFailed(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, t := range c.targets {
		errs = append(errs, t.syncAll(ctx, t.failedKeys())...)
	}
	return c.Pending(), errors.Join(errs...)
}

// Resync repairs drift of every target (see Target.resync). Periodic
// sources and manager starts call it.
func (c *Controller) Resync(ctx context.Context) error {
	return c.resync(ctx, false)
}

// ResyncRest is Resync of the target keys whose last write did not
// succeed, or that were not written at all (objects that carry the
// controller's record with no output for them): the resync of a start,
// right after its first batch. The keys that batch wrote were written
// against the cache's state of a moment ago, which may not hold the
// writes' own echoes yet: looking at them again now would take the cache's
// lag for a change by someone else and write them a second time. A change
// by someone else reaches them as a watch event (RestoreTarget).
func (c *Controller) ResyncRest(ctx context.Context) error {
	return c.resync(ctx, true)
}

func (c *Controller) resync(ctx context.Context, skipWritten bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, t := range c.targets {
		errs = append(errs, t.resync(ctx, skipWritten)...)
	}
	return errors.Join(errs...)
}

// NamespaceLocal reports whether the controller's pipeline never combines
// objects of two namespaces (pipeline.Pipeline.NamespaceLocal), as a
// namespace-sharded operator needs; the error names the stage.
func (c *Controller) NamespaceLocal() error { return c.pipe.NamespaceLocal() }
