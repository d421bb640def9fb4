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
	// Outputs are the names of the collections the pipeline may write, in
	// order: the controller's target names (a target's `name:`, else its
	// kind). A plain pipeline (a stage or a list of stages) writes its one
	// output under Outputs[0], or "" when Outputs is empty, and is refused
	// when Outputs has several names; a pipeline in branch form (see
	// Compile) writes each name from the branches whose @output is that name
	// and must write every one of them. Names must be distinct and
	// non-empty.
	Outputs []string
}

// Pipeline is a compiled pipeline: a dbsp circuit from the source
// collections to the output collections. It keeps the integrated state of
// its non-linear stages (joins, @gather, @groupBy, @distinct) and is not safe
// for concurrent use.
type Pipeline struct {
	sources []string
	outputs []string // Options.Outputs, or [""] for a plain pipeline without them
	opts    Options
	ev      *evaluator
	// branches in an order in which every stream is written before it is
	// read; a plain pipeline is one branch over the sources.
	branches []*branch
	// plain: one branch over all the sources, without @inputs and @output,
	// run without streams.
	plain bool
	// secretSource: one source kind is Secret, whose core Secrets are
	// decoded on entry (see DecodeSecret).
	secretSource bool
}

// branch is a chain of stages from its inputs to its output: the whole of
// a plain pipeline, or one branch of a pipeline in branch form.
type branch struct {
	path   string   // spec path of the branch, e.g. spec.controllers[0].pipeline[1]
	inputs []string // the names it reads: source kinds or streams of other branches
	source []bool   // per input: a source kind (else the stream of other branches)
	output string   // the name it writes
	// outLabel is the path and name of its @output stage, traced with the
	// branch's output; "" for a plain pipeline.
	outLabel string
	join     *joinStage // nil with a single input
	stages   []stage
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
	// opInputs and opOutput are the directives that open and close a
	// branch (see compileBranches).
	opInputs = "@inputs"
	opOutput = "@output"
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
// A list of lists of stages is the branch form (the form of Δ-controller's
// successor): each branch is [{"@inputs": [name, ...]}, stage, ...,
// {"@output": name}], reading source kinds or the streams that other
// branches write, and writing a stream or an output (Options.Outputs); see
// compileBranches for its rules. A plain list of stages that starts with
// @inputs or ends with @output is one such branch, its @inputs defaulting
// to all the sources and its @output to the only output.
//
// Errors are *expression.Error values carrying the spec path, e.g.
// `spec.controllers[0].pipeline[2]: unknown pipeline stage "@frobnicate"`:
// an unknown stage, a stage that is not a single-key map, a wrong argument
// shape, an invalid expression, a missing or misplaced @join, duplicate or
// empty source kinds or output names, a plain pipeline with several
// outputs, and the errors of the branch form.
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
	for i, o := range opts.Outputs {
		if o == "" {
			return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("output %d has an empty name", i)}
		}
		if slices.Contains(opts.Outputs[:i], o) {
			return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("duplicate output name %q", o)}
		}
	}
	p := &Pipeline{sources: slices.Clone(sources), opts: opts, secretSource: slices.Contains(sources, secretKind),
		ev: &evaluator{limits: opts.EvalLimits, dialect: opts.Dialect}, outputs: slices.Clone(opts.Outputs)}
	if len(p.outputs) == 0 {
		p.outputs = []string{""}
	}
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
		if isBranchForm(s) {
			if err := p.compileBranches(s, false); err != nil {
				return nil, err
			}
			return p, nil
		}
		specs = s
		for i := range s {
			paths = append(paths, expression.Index(opts.Path, i))
		}
		if hasDirective(s) {
			if err := p.compileBranches(s, true); err != nil {
				return nil, err
			}
			return p, nil
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
	if len(opts.Outputs) > 1 {
		return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf(
			"a pipeline writing several targets (%s) must be in branch form, a list of branches each ending in {\"%s\": <target>}",
			strings.Join(opts.Outputs, ", "), opOutput)}
	}
	b := &branch{path: opts.Path, inputs: p.sources, output: p.outputs[0]}
	for range p.sources {
		b.source = append(b.source, true)
	}
	if err := p.compileChain(b, specs, paths, "sources", "a pipeline"); err != nil {
		return nil, err
	}
	if len(sources) > 1 && b.join == nil {
		return nil, &expression.Error{Path: opts.Path, Err: fmt.Errorf("a pipeline over several sources (%s) must start with @join", strings.Join(sources, ", "))}
	}
	p.branches, p.plain = []*branch{b}, true
	return p, nil
}

// compileChain compiles the stages specs (at paths) of b, whose inputs are
// set. what names the inputs in errors ("sources" or "inputs") and whole
// the chain ("a pipeline" or "a branch").
func (p *Pipeline) compileChain(b *branch, specs []any, paths []string, what, whole string) error {
	opts := p.opts
	for i, st := range specs {
		name, arg, err := stageOf(st, paths[i])
		if err != nil {
			return err
		}
		switch name {
		case opInputs, opOutput:
			return &expression.Error{Path: paths[i], Err: fmt.Errorf("%s must be the %s stage of a branch", name, map[string]string{opInputs: "first", opOutput: "last"}[name])}
		case opJoin:
			switch {
			case len(b.inputs) < 2:
				return &expression.Error{Path: paths[i], Err: fmt.Errorf("@join needs at least two %s, have %d", what, len(b.inputs))}
			case i > 0:
				return &expression.Error{Path: paths[i], Err: errors.New("@join must be the first stage")}
			}
			if b.join, err = compileJoin(arg, paths[i], b.inputs, p.ev); err != nil {
				return err
			}
			if opts.MaxDeltaEntries > 0 {
				b.join.max = opts.MaxDeltaEntries
				for _, j := range b.join.joins {
					j.SetMaxOutput(opts.MaxDeltaEntries)
				}
			}
			continue
		}
		if i == 0 && len(b.inputs) > 1 {
			return &expression.Error{Path: paths[i], Err: fmt.Errorf("%s over several %s (%s) must start with @join", whole, what, strings.Join(b.inputs, ", "))}
		}
		op, err := compileStage(name, arg, paths[i], p.ev)
		if err != nil {
			return err
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
			if m, ok := op.(*dbsp.Map); ok && b.join == nil && b.source[0] && !p.secretSource && b.onlySelects() {
				m.Memoize()
				st.stateful = true
			}
		}
		b.stages = append(b.stages, st)
	}
	return nil
}

// onlySelects reports whether every stage compiled so far is a @select,
// which passes its input documents on as they are.
func (b *branch) onlySelects() bool {
	for _, st := range b.stages {
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

// Outputs returns the names of the output collections in order:
// Options.Outputs, or [""] for a plain pipeline compiled without them.
func (p *Pipeline) Outputs() []string { return slices.Clone(p.outputs) }

// Process is one incremental step of the circuit: it takes the changes of
// the source collections in this step, keyed by source kind (missing kinds
// did not change), and returns the change of the output collection, as a
// consolidated Z-set (an update of an output document shows as its old
// version with weight -1 and its new version with weight +1). The input
// Z-sets are not modified and the result is owned by the caller. A
// pipeline with several outputs is refused (see ProcessOutputs).
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
// the stages that already ran (in any branch) are undone (each stateful
// stage steps again on its negated input), so the circuit's state is
// exactly as before the call.
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
	if err := p.single(); err != nil {
		return nil, err
	}
	if err := p.inputs(deltas); err != nil {
		return nil, err
	}
	p.ev.begin(ctx)
	defer p.ev.begin(nil)
	if p.plain {
		return p.runPlain(deltas, true)
	}
	out, err := p.run(deltas, true)
	return out[p.outputs[0]], err
}

// ProcessOutputs is ProcessContext for a pipeline with any number of
// outputs: it returns the change of every output collection, keyed by
// output name (every name of Outputs is present, an unchanged output as
// an empty Z-set). Errors and limits are as for Process; on a *LimitError
// the map is nil.
func (p *Pipeline) ProcessOutputs(ctx context.Context, deltas map[string]*dbsp.ZSet) (map[string]*dbsp.ZSet, error) {
	if err := p.inputs(deltas); err != nil {
		return nil, err
	}
	p.ev.begin(ctx)
	defer p.ev.begin(nil)
	if p.plain {
		out, err := p.runPlain(deltas, true)
		if out == nil {
			return nil, err
		}
		return map[string]*dbsp.ZSet{p.outputs[0]: out}, err
	}
	return p.run(deltas, true)
}

// Evaluate is the snapshot twin of Process: it computes the whole output
// collection from the whole source collections, keyed by source kind,
// without reading or changing the incremental state. Errors are as for
// Process.
func (p *Pipeline) Evaluate(state map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	if err := p.single(); err != nil {
		return nil, err
	}
	if err := p.inputs(state); err != nil {
		return nil, err
	}
	if p.plain {
		return p.runPlain(state, false)
	}
	out, err := p.run(state, false)
	return out[p.outputs[0]], err
}

// EvaluateOutputs is the snapshot twin of ProcessOutputs: the whole of
// every output collection, keyed by output name, from the whole source
// collections. Errors are as for Process.
func (p *Pipeline) EvaluateOutputs(state map[string]*dbsp.ZSet) (map[string]*dbsp.ZSet, error) {
	if err := p.inputs(state); err != nil {
		return nil, err
	}
	if p.plain {
		out, err := p.runPlain(state, false)
		return map[string]*dbsp.ZSet{p.outputs[0]: out}, err
	}
	return p.run(state, false)
}

// single refuses Process and Evaluate on a pipeline with several outputs.
func (p *Pipeline) single() error {
	if len(p.outputs) > 1 {
		return &expression.Error{Path: p.opts.Path, Err: fmt.Errorf(
			"the pipeline has several outputs (%s): use ProcessOutputs or EvaluateOutputs", strings.Join(p.outputs, ", "))}
	}
	return nil
}

// runState is the state of one Process or Evaluate call, across branches.
type runState struct {
	incremental bool
	max         int // Options.MaxDeltaEntries when incremental, else 0
	// undo holds, while a bounded step runs, the undo of each stage step
	// already taken, in order.
	undo []func()
	errs []error
}

// fail undoes the steps taken and returns the *LimitError of stage.
func (r *runState) fail(stage string, le *dbsp.LimitError) error {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	return &LimitError{Stage: stage, Limit: le.Limit, Count: le.Count}
}

func (p *Pipeline) newRun(incremental bool) *runState {
	r := &runState{incremental: incremental}
	if incremental {
		r.max = p.opts.MaxDeltaEntries
	}
	return r
}

// done ends a call: once it is over its steps stand (or were undone), so
// the stages that log for an undo drop their logs, and the joins drop the
// inputs they kept for one.
func (p *Pipeline) done(r *runState) {
	for _, b := range p.branches {
		if r.incremental {
			for _, st := range b.stages {
				if f, ok := st.op.(interface{ ForgetStep() }); ok {
					f.ForgetStep()
				}
			}
		}
		if b.join != nil {
			b.join.inputs = nil
		}
	}
}

// runPlain runs a plain pipeline on its source collections.
func (p *Pipeline) runPlain(in map[string]*dbsp.ZSet, incremental bool) (*dbsp.ZSet, error) {
	in = p.decodeSecrets(in)
	r := p.newRun(incremental)
	defer p.done(r)
	out, err := p.branches[0].run(p, r, in)
	if err != nil {
		return nil, err
	}
	return out, errors.Join(r.errs...)
}

// run runs the branches in order on the source collections in: each reads
// the sources and the streams written before it (the sum of the outputs of
// the branches that write the stream: Z-set addition, bag semantics), and
// the outputs are the streams of the output names.
func (p *Pipeline) run(in map[string]*dbsp.ZSet, incremental bool) (map[string]*dbsp.ZSet, error) {
	in = p.decodeSecrets(in)
	r := p.newRun(incremental)
	defer p.done(r)
	streams := make(map[string]*dbsp.ZSet, len(p.branches))
	for _, b := range p.branches {
		bin := make(map[string]*dbsp.ZSet, len(b.inputs))
		for i, name := range b.inputs {
			if b.source[i] {
				bin[name] = in[name]
			} else {
				bin[name] = streams[name]
			}
		}
		out, err := b.run(p, r, bin)
		if err != nil {
			return nil, err
		}
		p.trace(b.outLabel, out)
		if prev := streams[b.output]; prev != nil {
			// Both may be owned elsewhere (an input, a branch's result):
			// the sum is a new Z-set.
			out = prev.Plus(out)
		}
		streams[b.output] = out
	}
	outs := make(map[string]*dbsp.ZSet, len(p.outputs))
	for _, name := range p.outputs {
		if z := streams[name]; z != nil {
			outs[name] = z
		} else {
			outs[name] = dbsp.NewZSet()
		}
	}
	return outs, errors.Join(r.errs...)
}

// run steps (incremental) or snapshots the branch on in, its inputs by
// name (a missing one: no change, or empty). Per-document errors are added
// to r.errs; the only error returned is a *LimitError, after undoing r's
// steps.
func (b *branch) run(p *Pipeline, r *runState, in map[string]*dbsp.ZSet) (*dbsp.ZSet, error) {
	var cur *dbsp.ZSet
	max := r.max
	if b.join != nil {
		label := expression.Field(b.join.path, opJoin)
		var err error
		cur, err = b.join.run(in, r.incremental)
		var le *dbsp.LimitError
		if errors.As(err, &le) {
			return nil, r.fail(label, le)
		}
		if err != nil {
			r.errs = append(r.errs, err)
		}
		if max > 0 {
			js := b.join
			r.undo = append(r.undo, func() { js.undo(in) })
		}
		p.trace(label, cur)
	} else {
		cur = input(in, b.inputs[0])
		if len(b.stages) == 0 {
			cur = cur.Clone()
		}
	}
	for _, st := range b.stages {
		var err error
		prev := cur
		if r.incremental {
			cur, err = st.op.Step(cur)
		} else {
			cur, err = st.op.Snapshot(cur)
		}
		if max > 0 {
			var le *dbsp.LimitError
			if errors.As(err, &le) {
				return nil, r.fail(st.label, le)
			}
			if u, ok := st.op.(interface{ UndoStep() }); ok && st.stateful {
				// A memoizing @project restores what it remembered
				// (stepping back would evaluate it again).
				r.undo = append(r.undo, u.UndoStep)
			} else if st.stateful {
				op := st.op
				r.undo = append(r.undo, func() { _, _ = op.Step(prev.Negate()) })
			}
			if cur.Len() > max {
				return nil, r.fail(st.label, &dbsp.LimitError{Limit: max, Count: cur.Len()})
			}
		}
		if err != nil {
			r.errs = append(r.errs, err)
		}
		p.trace(st.label, cur)
	}
	return cur, nil
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
	if p.opts.Trace != nil && path != "" {
		p.opts.Trace(path, z)
	}
}

// Reset drops the incremental state of every stage: the next Process
// starts from empty source collections.
func (p *Pipeline) Reset() {
	for _, b := range p.branches {
		if b.join != nil {
			b.join.reset()
		}
		for _, st := range b.stages {
			st.op.Reset()
		}
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
