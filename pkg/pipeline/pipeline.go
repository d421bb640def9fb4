package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// Options configures Compile.
type Options struct {
	// Path is the spec path of the pipeline, e.g.
	// `spec.controllers[0].pipeline`. It prefixes every compile and
	// evaluation error.
	Path string
	// Trace, if set, is called by Process and Evaluate with each stage's
	// output delta (Evaluate: output collection) after the stage ran; stage
	// is the stage's spec path and name, e.g.
	// `spec.controllers[0].pipeline[1]["@project"]`. The
	// Z-set must not be modified.
	Trace func(stage string, delta *dbsp.ZSet)
	// MaxDeltaEntries bounds the output delta of every stage in one
	// Process call (see LimitError); 0 means no bound. Evaluate is never
	// bounded.
	MaxDeltaEntries int
	// EvalLimits bound the work of each expression evaluated on one
	// document: a @select's condition, a @project (each step of its list
	// form), a @join's condition on one joined document, a @gather's or
	// @groupBy's key and a @groupBy's value (see expression.Limits: a zero
	// field is its default, a negative one no bound). A document whose
	// evaluation exceeds them fails like any other evaluation error: it
	// contributes nothing and its error, located at the expression that
	// exceeded the budget, is returned with the output of the others.
	EvalLimits expression.Limits
	// Dialect selects the meaning of the expression operators and stages
	// that changed between Δ-controller and its successor (see
	// expression.Dialect): @unwind leaves metadata.name alone and @groupBy
	// adds "documents" in the successor's. The zero value is Δ-controller's
	// meaning. A controller written with `targets:` runs in the successor's
	// dialect, one written with `target:` in Δ-controller's.
	Dialect expression.Dialect
}

// Pipeline is a compiled pipeline: a dbsp circuit from the source
// collections to the output collection. It keeps the integrated state of
// its non-linear stages (joins, @gather, @groupBy, @distinct) and is not safe
// for concurrent use.
type Pipeline struct {
	sources []string
	opts    Options
	ev      *evaluator
	join    *joinStage // nil with a single source
	stages  []stage
	// secretSource: one source kind is Secret, whose core Secrets are
	// decoded on entry (see DecodeSecret).
	secretSource bool
}

// stage is a compiled unary stage.
type stage struct {
	path  string
	label string // path and stage name, e.g. spec.controllers[0].pipeline[1]["@project"]
	op    dbsp.Operator
	// name and arg are the stage name and its (normalized) argument spec,
	// kept for the static checks (see NamespaceLocal).
	name string
	arg  any
	// stateful stages (@gather, @groupBy, @distinct) integrate their input;
	// a failed Process undoes their step.
	stateful bool
}

// Stage names and their aliases.
const (
	opJoin     = "@join"
	opSelect   = "@select"
	opProject  = "@project"
	opUnwind   = "@unwind"
	opDemux    = "@demux"
	opGather   = "@gather"
	opMux      = "@mux"
	opGroupBy  = "@groupBy"
	opDistinct = "@distinct"
	// opAggregate is not a stage: {"@join": ..., "@aggregate": [...]} is
	// the earlier Δ-controller spelling of a list of stages.
	opAggregate = "@aggregate"
)

// Compile compiles a pipeline spec over the given source kinds.
//
// spec is a decoded JSON value: a stage (a map with a single "@stage" key,
// or the bare string "@distinct") or a list of stages; nil or an empty list is the identity pipeline of a
// single source. The earlier Δ-controller spelling {"@join": cond,
// "@aggregate": [stage, ...]} is read as [{"@join": cond}, stage, ...]. Numbers may be of any Go numeric type or json.Number.
// sources are the kinds of the source collections in order, e.g. ["Pod"] or
// ["Pod", "Service"]; with several sources the pipeline must start with
// @join, whose subject is the compound document {kind: document, ...}.
//
// Errors are *expression.Error values carrying the spec path, e.g.
// `spec.controllers[0].pipeline[2]: unknown pipeline stage "@frobnicate"`:
// an unknown stage, a stage that is not a single-key map, a wrong argument
// shape, an invalid expression, a missing or misplaced @join, duplicate or
// empty source kinds.
//
// A source of kind "Secret" gets its core Secrets decoded on entry by
// Process and Evaluate (see DecodeSecret).
func Compile(spec any, sources []string, opts Options) (*Pipeline, error) {
	if len(sources) == 0 {
		return nil, &expression.Error{Path: opts.Path, Err: errors.New("a pipeline needs at least one source")}
	}
	for i, s := range sources {
		if s == "" {
			return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("source %d has an empty kind", i)}
		}
		if slices.Contains(sources[:i], s) {
			return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("duplicate source kind %q", s)}
		}
	}
	p := &Pipeline{sources: slices.Clone(sources), opts: opts, secretSource: slices.Contains(sources, secretKind),
		ev: &evaluator{limits: opts.EvalLimits, dialect: opts.Dialect}}
	p.ev.begin(nil)

	var specs []any
	var paths []string
	norm := expression.Normalize(spec)
	if norm == nil && spec != nil {
		return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("a pipeline must be a stage or a list of stages, got %T", spec)}
	}
	switch s := norm.(type) {
	case nil:
	case []any:
		specs = s
		for i := range s {
			paths = append(paths, expression.Index(opts.Path, i))
		}
	case string:
		if s != opDistinct {
			return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("a pipeline must be a stage or a list of stages, got string")}
		}
		specs, paths = []any{s}, []string{opts.Path} // the stage "@distinct"
	case map[string]any:
		if _, ok := s[opAggregate]; ok {
			var err error
			if specs, paths, err = aggregateForm(s, opts.Path); err != nil {
				return nil, err
			}
			break
		}
		specs, paths = []any{s}, []string{opts.Path}
	default:
		return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("a pipeline must be a stage or a list of stages, got %s", typeName(s))}
	}

	for i, st := range specs {
		name, arg, err := stageOf(st, paths[i])
		if err != nil {
			return nil, err
		}
		if name == opJoin {
			switch {
			case len(sources) < 2:
				return nil, &expression.Error{Path: paths[i], Err: fmt.Errorf("@join needs at least two sources, have %d", len(sources))}
			case i > 0:
				return nil, &expression.Error{Path: paths[i], Err: errors.New("@join must be the first stage")}
			}
			if p.join, err = compileJoin(arg, paths[i], p.sources, p.ev); err != nil {
				return nil, err
			}
			if opts.MaxDeltaEntries > 0 {
				p.join.max = opts.MaxDeltaEntries
				for _, j := range p.join.joins {
					j.SetMaxOutput(opts.MaxDeltaEntries)
				}
			}
			continue
		}
		if i == 0 && len(sources) > 1 {
			return nil, &expression.Error{Path: paths[i], Err: fmt.Errorf("a pipeline over several sources (%s) must start with @join", strings.Join(sources, ", "))}
		}
		op, err := compileStage(name, arg, paths[i], p.ev)
		if err != nil {
			return nil, err
		}
		if l, ok := op.(dbsp.Limited); ok && opts.MaxDeltaEntries > 0 {
			l.SetMaxOutput(opts.MaxDeltaEntries)
		}
		st := stage{path: paths[i], label: expression.Field(paths[i], name), op: op, name: name, arg: arg}
		switch name {
		case opGather, opMux, opGroupBy, opDistinct:
			st.stateful = true
		case opProject:
			// A @project over the source objects themselves (only @select
			// before it, no @join, no decoded Secrets) remembers its
			// results: an update evaluates it once, for the new version.
			if m, ok := op.(*dbsp.Map); ok && p.join == nil && !p.secretSource && p.onlySelects() {
				m.Memoize()
				st.stateful = true
			}
		}
		p.stages = append(p.stages, st)
	}
	if len(sources) > 1 && p.join == nil {
		return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("a pipeline over several sources (%s) must start with @join", strings.Join(sources, ", "))}
	}
	return p, nil
}

// onlySelects reports whether every stage compiled so far is a @select,
// which passes its input documents on as they are.
func (p *Pipeline) onlySelects() bool {
	for _, st := range p.stages {
		if st.name != opSelect {
			return false
		}
	}
	return true
}

// aggregateForm reads the earlier Δ-controller spelling of a pipeline, a
// map {"@join": cond, "@aggregate": [stage, ...]} (the @join optional),
// as the list [{"@join": cond}, stage, ...]. It returns the stages and
// their spec paths (pipeline["@aggregate"][i]); any other key is an error.
func aggregateForm(m map[string]any, path string) ([]any, []string, error) {
	for k := range m {
		if k != opJoin && k != opAggregate {
			return nil, nil, &expression.Error{Path: path, Err: fmt.Errorf("a pipeline map with %q may only have %q besides it, got %q; or write the pipeline as a list of stages", opAggregate, opJoin, k)}
		}
	}
	var specs []any
	var paths []string
	if j, ok := m[opJoin]; ok {
		specs = append(specs, map[string]any{opJoin: j})
		paths = append(paths, path)
	}
	aggPath := expression.Field(path, opAggregate)
	switch a := m[opAggregate].(type) {
	case []any:
		for i, st := range a {
			specs = append(specs, st)
			paths = append(paths, expression.Index(aggPath, i))
		}
	case map[string]any:
		specs = append(specs, a)
		paths = append(paths, aggPath)
	default:
		return nil, nil, &expression.Error{Path: aggPath, Err: fmt.Errorf("%s must be a list of stages, got %s", opAggregate, describeShape(a))}
	}
	return specs, paths, nil
}

// stageOf splits a stage spec into its name and argument. The string
// "@distinct", the one stage without argument, is {"@distinct": null}, as
// the successor writes it.
func stageOf(spec any, path string) (string, any, error) {
	if spec == opDistinct {
		return opDistinct, nil, nil
	}
	m, ok := spec.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, &expression.Error{Path: path, Err: fmt.Errorf("a pipeline stage must be a map with a single \"@stage\" key, got %s", describeShape(spec))}
	}
	var name string
	var arg any
	for name, arg = range m {
	}
	return name, arg, nil
}

// Sources returns the source kinds of the pipeline in order.
func (p *Pipeline) Sources() []string { return slices.Clone(p.sources) }

// inputs checks the keys of a per-kind input map.
func (p *Pipeline) inputs(in map[string]*dbsp.ZSet) error {
	for kind := range in {
		if !slices.Contains(p.sources, kind) {
			return &expression.Error{Path: p.opts.Path, Err: fmt.Errorf("unknown source kind %q (sources: %s)", kind, strings.Join(p.sources, ", "))}
		}
	}
	return nil
}

func input(in map[string]*dbsp.ZSet, kind string) *dbsp.ZSet {
	if z := in[kind]; z != nil {
		return z
	}
	return dbsp.NewZSet()
}

// Process is one incremental step of the circuit: it takes the changes of
// the source collections in this step, keyed by source kind (missing kinds
// did not change), and returns the change of the output collection, as a
// consolidated Z-set (an update of an output document shows as its old
// version with weight -1 and its new version with weight +1). The input
// Z-sets are not modified and the result is owned by the caller.
//
// Documents must be in the JSON data model (as decoded by encoding/json or
// held by unstructured Kubernetes objects) and are never modified: output
// documents may share maps and lists with input documents, so callers must
// treat both as read-only. The circuit integrates its inputs, so a deletion
// or the old half of an update must carry a document equal to the one
// inserted before.
//
// A key that is not a source kind is an error, and nothing is processed.
// Per-document evaluation errors (a failing expression, a @select that is
// not a bool, an @unwind of a non-list) do not stop processing: the failing
// document contributes nothing, in Process and in Evaluate alike, so the
// state stays consistent; Process returns the output of the other documents
// together with the joined errors, each carrying its spec path.
//
// With Options.MaxDeltaEntries set, a stage whose output delta would hold
// more entries than the bound fails the whole call with a *LimitError and
// no output: the fan-out stages (@join, @unwind) stop as soon as the bound
// is passed, the others are checked when they are done, and the steps of
// the stages that already ran are undone (each stateful stage steps again
// on its negated input), so the circuit's state is exactly as before the
// call.
func (p *Pipeline) Process(deltas map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	return p.ProcessContext(context.Background(), deltas)
}

// ProcessContext is Process whose evaluations stop when ctx ends: an
// evaluation in progress returns within about a thousand steps (see
// expression.Budget) with an error that wraps ctx's error, and so do the
// evaluations of the documents after it. The circuit's state then misses
// those documents: a caller that cancels a run must Reset the pipeline or
// drop it.
func (p *Pipeline) ProcessContext(ctx context.Context, deltas map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	if err := p.inputs(deltas); err != nil {
		return nil, err
	}
	p.ev.begin(ctx)
	defer p.ev.begin(nil)
	return p.run(deltas, true)
}

// Evaluate is the snapshot twin of Process: it computes the whole output
// collection from the whole source collections, keyed by source kind,
// without reading or changing the incremental state. Errors are as for
// Process.
func (p *Pipeline) Evaluate(state map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	if err := p.inputs(state); err != nil {
		return nil, err
	}
	return p.run(state, false)
}

func (p *Pipeline) run(in map[string]*dbsp.ZSet, incremental bool) (*dbsp.ZSet, error) {
	in = p.decodeSecrets(in)
	var errs []error
	var cur *dbsp.ZSet
	max := 0
	if incremental {
		max = p.opts.MaxDeltaEntries
	}
	// undo holds, while a bounded step runs, the undo of each stage step
	// already taken, in order.
	var undo []func()
	if incremental {
		// Once the call is over its steps stand (or were undone): the
		// stages that log for an undo drop their logs.
		defer func() {
			for _, st := range p.stages {
				if f, ok := st.op.(interface{ ForgetStep() }); ok {
					f.ForgetStep()
				}
			}
		}()
	}
	if p.join != nil {
		defer func() { p.join.inputs = nil }()
	}
	fail := func(stage string, le *dbsp.LimitError) error {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		return &LimitError{Stage: stage, Limit: le.Limit, Count: le.Count}
	}
	if p.join != nil {
		var err error
		label := expression.Field(p.join.path, opJoin)
		cur, err = p.join.run(in, incremental)
		var le *dbsp.LimitError
		if errors.As(err, &le) {
			return nil, fail(label, le)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if max > 0 {
			undo = append(undo, func() { p.join.undo(in) })
		}
		p.trace(label, cur)
	} else {
		cur = input(in, p.sources[0])
		if len(p.stages) == 0 {
			cur = cur.Clone()
		}
	}
	for _, st := range p.stages {
		var err error
		prev := cur
		if incremental {
			cur, err = st.op.Step(cur)
		} else {
			cur, err = st.op.Snapshot(cur)
		}
		if max > 0 {
			var le *dbsp.LimitError
			if errors.As(err, &le) {
				return nil, fail(st.label, le)
			}
			if u, ok := st.op.(interface{ UndoStep() }); ok && st.stateful {
				// A memoizing @project restores what it remembered
				// (stepping back would evaluate it again).
				undo = append(undo, u.UndoStep)
			} else if st.stateful {
				undo = append(undo, func() { _, _ = st.op.Step(prev.Negate()) })
			}
			if cur.Len() > max {
				return nil, fail(st.label, &dbsp.LimitError{Limit: max, Count: cur.Len()})
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
		p.trace(st.label, cur)
	}
	return cur, errors.Join(errs...)
}

// LimitError is the error of a Process call in which one stage's output
// delta would hold more than Options.MaxDeltaEntries entries. The call had
// no effect on the circuit's state.
type LimitError struct {
	// Stage is the spec path and name of the stage, e.g.
	// `spec.controllers[0].pipeline[2]["@unwind"]`.
	Stage string
	// Limit is the bound.
	Limit int
	// Count is the number of entries the stage would have emitted, when it
	// is known without building them (an @unwind counts its lists, a stage
	// checked when done counts its output); 0 when only "more than Limit"
	// is known.
	Count int
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Count > e.Limit {
		return fmt.Sprintf("%s: the change would make this stage emit %d entries, over the limit of %d", e.Stage, e.Count, e.Limit)
	}
	return fmt.Sprintf("%s: the change makes this stage emit more than %d entries (the limit)", e.Stage, e.Limit)
}

func (p *Pipeline) trace(path string, z *dbsp.ZSet) {
	if p.opts.Trace != nil {
		p.opts.Trace(path, z)
	}
}

// Reset drops the incremental state of every stage: the next Process
// starts from empty source collections.
func (p *Pipeline) Reset() {
	if p.join != nil {
		p.join.reset()
	}
	for _, st := range p.stages {
		st.op.Reset()
	}
}

// typeName names the JSON type of a value in error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	case int64, float64:
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func describeShape(v any) string {
	if m, ok := v.(map[string]any); ok {
		return fmt.Sprintf("a map with %d keys", len(m))
	}
	return "a " + typeName(v)
}

// docError attaches the identity of the document that failed to err.
func docError(err error, doc dbsp.Document) error {
	if err == nil || errors.Is(err, dbsp.ErrSkip) {
		return err
	}
	if id := docID(doc); id != "" {
		return fmt.Errorf("%w (document %s)", err, id)
	}
	return err
}

// docID is "namespace/name" of an object, or "Kind namespace/name, ..." of a
// compound join document, or "" when the document has no name.
func docID(doc dbsp.Document) string {
	if id := objectID(doc); id != "" {
		return id
	}
	var parts []string
	for kind, v := range doc {
		if m, ok := v.(map[string]any); ok {
			if id := objectID(m); id != "" {
				parts = append(parts, kind+" "+id)
			}
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func objectID(doc dbsp.Document) string {
	md, _ := doc["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		return ""
	}
	if ns, _ := md["namespace"].(string); ns != "" {
		return ns + "/" + name
	}
	return name
}
