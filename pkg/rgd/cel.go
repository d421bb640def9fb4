package rgd

import (
	"context"
	"errors"
	"fmt"
	"github.com/dcontroller/dcontroller/pkg/expression/celkro"
	"sort"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// Omit is the value of a field whose expression returned omit(): the field
// (a map key, or a list element) is left out of the rendered object.
type Omit = celkro.Omit

// omitFunction is kro's field-removal function.
const omitFunction = celkro.OmitFunction

// The variables kro defines for expressions
// (website/docs/docs/concepts/rgd/03-cel-expressions.md).
const (
	// SchemaVar is the instance: its metadata and spec (its status is not
	// readable, as in kro).
	SchemaVar = "schema"
	// EachVar is one item of a collection in the collection's readyWhen.
	EachVar = "each"
	// RuntimeVar is kro's library for custom status conditions, which is
	// refused (see RefusedFunctions).
	RuntimeVar = "runtime"
)

// DefaultCostLimit bounds the runtime cost of one evaluation, in the unit of
// cel-go's cost model (the unit of Kubernetes CEL validation's budget); it is
// the bound @cel expressions of Operators have (pkg/expression).
const DefaultCostLimit = celkro.CostLimit

// RefusedFunctions are the functions of kro's CEL libraries that expressions
// here may not call, each with the reason. Calling one is a compile error
// naming the function.
var RefusedFunctions = map[string]string{
	"runtime.newCondition": "custom status conditions (status.conditions) are not supported",
	"runtime.condition":    "custom status conditions (status.conditions) are not supported",
}

// Declarations are the variables an Env declares besides schema. All are
// dynamically typed: expressions are checked for syntax, known functions and
// known identifiers, not against the referenced kinds' OpenAPI schemas.
type Declarations struct {
	// Resources are the ids of resources that stand for one object.
	Resources []string
	// Collections are the ids of resources that stand for a list of objects
	// (a forEach resource, an externalRef with a selector).
	Collections []string
	// Iterators are forEach iterator names.
	Iterators []string
	// Each declares the each variable.
	Each bool
}

// Env compiles RGD expressions. It is safe for concurrent use.
type Env struct {
	env       *cel.Env
	known     map[string]bool
	functions map[string]bool
}

// NewEnv returns the environment with schema and the declared variables.
// A name declared twice is an error.
func NewEnv(d Declarations) (*Env, error) {
	base, err := celkro.Env()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	known := map[string]bool{SchemaVar: true}
	opts := []cel.EnvOption{cel.Variable(SchemaVar, cel.DynType)}
	add := func(name string, t *cel.Type) error {
		if known[name] {
			return fmt.Errorf("CEL environment: %q declared twice", name)
		}
		known[name] = true
		opts = append(opts, cel.Variable(name, t))
		return nil
	}
	for _, n := range d.Resources {
		if err := add(n, cel.DynType); err != nil {
			return nil, err
		}
	}
	for _, n := range d.Collections {
		if err := add(n, cel.ListType(cel.DynType)); err != nil {
			return nil, err
		}
	}
	for _, n := range d.Iterators {
		if err := add(n, cel.DynType); err != nil {
			return nil, err
		}
	}
	if d.Each {
		if err := add(EachVar, cel.DynType); err != nil {
			return nil, err
		}
	}
	env, err := base.Extend(opts...)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	fns := map[string]bool{}
	for name := range env.Functions() {
		fns[name] = true
	}
	return &Env{env: env, known: known, functions: fns}, nil
}

// namespace reports whether q is the namespace of a declared function
// (hash, json, lists, ...).
func (e *Env) namespace(q string) bool {
	for f := range e.functions {
		if strings.HasPrefix(f, q+".") {
			return true
		}
	}
	return false
}

// Reference is one use of a variable in an expression.
type Reference struct {
	// Name is the variable: schema, a resource id, an iterator or each.
	Name string
	// Path is the field path selected from the variable, as far as it is
	// constant ("status.loadBalancer.ingress[0]"; "" when the whole value is
	// used or the first selection is computed).
	Path string
}

// Expression is a compiled RGD expression.
type Expression struct {
	// Source is the CEL source.
	Source string
	// References are the variables the expression names, in order of
	// appearance, one per distinct (Name, Path).
	References []Reference
	// Functions are the functions the expression calls, sorted, with
	// namespaced ones by their full name (random.seededString).
	Functions []string
	// OutputType is the checked type of the result (dyn when it depends on
	// a variable's value).
	OutputType *cel.Type

	prog cel.Program
}

// Names returns the distinct variable names the expression references, in
// order of appearance.
func (x *Expression) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range x.References {
		if !seen[r.Name] {
			seen[r.Name] = true
			out = append(out, r.Name)
		}
	}
	return out
}

// Calls reports whether the expression calls the named function.
func (x *Expression) Calls(name string) bool {
	i := sort.SearchStrings(x.Functions, name)
	return i < len(x.Functions) && x.Functions[i] == name
}

// Compile parses and checks src. Errors: a syntax error, an unknown
// identifier ("unknown identifier foo"), a refused function (naming it and
// why), an unknown function or a type error found by the checker.
func (e *Env) Compile(src string) (*Expression, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	parsed, iss := e.env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("CEL syntax: %s", issueText(iss))
	}
	w := &walker{env: e, bound: map[string]int{}, refSeen: map[Reference]bool{}, fnSeen: map[string]bool{}}
	w.visit(parsed.NativeRep().Expr())
	if w.err != nil {
		return nil, w.err
	}
	if len(w.unknown) > 0 {
		return nil, fmt.Errorf("unknown identifier %s", strings.Join(w.unknown, ", "))
	}
	checked, iss := e.env.Check(parsed)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("CEL: %s", issueText(iss))
	}
	prog, err := e.env.Program(checked, celkro.ProgramOptions()...)
	if err != nil {
		return nil, fmt.Errorf("CEL: %w", err)
	}
	fns := make([]string, 0, len(w.fnSeen))
	for f := range w.fnSeen {
		fns = append(fns, f)
	}
	sort.Strings(fns)
	return &Expression{Source: src, References: w.refs, Functions: fns, OutputType: checked.OutputType(), prog: prog}, nil
}

// issueText is the issues' messages without cel-go's source excerpt.
func issueText(iss *cel.Issues) string {
	var msgs []string
	for _, e := range iss.Errors() {
		msgs = append(msgs, fmt.Sprintf("column %d: %s", e.Location.Column()+1, e.Message))
	}
	return strings.Join(msgs, "; ")
}

// walker collects the free identifiers and the functions of a parsed
// expression.
type walker struct {
	env     *Env
	bound   map[string]int
	refs    []Reference
	refSeen map[Reference]bool
	fnSeen  map[string]bool
	unknown []string
	err     error
}

func (w *walker) ref(name string, segs []string) {
	if w.bound[name] > 0 {
		return
	}
	if !w.env.known[name] {
		if name == RuntimeVar {
			w.fail(fmt.Errorf("%s is not supported: %s", RuntimeVar, RefusedFunctions["runtime.newCondition"]))
			return
		}
		for _, u := range w.unknown {
			if u == name {
				return
			}
		}
		w.unknown = append(w.unknown, name)
		return
	}
	r := Reference{Name: name, Path: strings.Join(segs, "")}
	r.Path = strings.TrimPrefix(r.Path, ".")
	if !w.refSeen[r] {
		w.refSeen[r] = true
		w.refs = append(w.refs, r)
	}
}

func (w *walker) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *walker) function(name string) {
	if why, ok := RefusedFunctions[name]; ok {
		w.fail(fmt.Errorf("function %s is not supported: %s", name, why))
		return
	}
	w.fnSeen[name] = true
}

// chain follows selections (a.b, a.?b, a[k]) down to an identifier. It
// returns the identifier, the constant path segments in order (".b", "[0]";
// cut short at the first computed index), and the computed index
// expressions, which are walked apart.
func chain(e celast.Expr) (root string, segs []string, computed []celast.Expr, ok bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent(), nil, nil, true
	case celast.SelectKind:
		s := e.AsSelect()
		root, segs, computed, ok = chain(s.Operand())
		if ok && computed == nil {
			segs = append(segs, selSeg(s.FieldName()))
		}
		return root, segs, computed, ok
	case celast.CallKind:
		c := e.AsCall()
		if c.IsMemberFunction() || len(c.Args()) != 2 {
			return "", nil, nil, false
		}
		switch c.FunctionName() {
		case "_?._", "_[_]", "_[?_]":
		default:
			return "", nil, nil, false
		}
		root, segs, computed, ok = chain(c.Args()[0])
		if !ok {
			return "", nil, nil, false
		}
		key := c.Args()[1]
		if key.Kind() == celast.LiteralKind && computed == nil {
			switch k := key.AsLiteral().(type) {
			case types.String:
				if c.FunctionName() == "_?._" {
					segs = append(segs, selSeg(string(k)))
				} else {
					segs = append(segs, "["+strconv.Quote(string(k))+"]")
				}
				return root, segs, computed, true
			case types.Int:
				segs = append(segs, "["+strconv.FormatInt(int64(k), 10)+"]")
				return root, segs, computed, true
			}
		}
		return root, segs, append(computed, key), true
	}
	return "", nil, nil, false
}

// selSeg is the path segment of a field selection.
func selSeg(name string) string {
	return Field("x", name)[1:]
}

// qualified returns the dotted name of a chain of plain selections ending in
// an identifier (hash.sha256's target "hash"), or "" if e is not one.
func qualified(e celast.Expr) string {
	switch e.Kind() {
	case celast.IdentKind:
		return e.AsIdent()
	case celast.SelectKind:
		s := e.AsSelect()
		if q := qualified(s.Operand()); q != "" && !s.IsTestOnly() {
			return q + "." + s.FieldName()
		}
	}
	return ""
}

func (w *walker) visit(e celast.Expr) {
	if e == nil || w.err != nil {
		return
	}
	switch e.Kind() {
	case celast.IdentKind, celast.SelectKind:
		root, segs, computed, ok := chain(e)
		if ok {
			w.ref(root, segs)
			for _, c := range computed {
				w.visit(c)
			}
			return
		}
		w.visit(e.AsSelect().Operand())
	case celast.CallKind:
		c := e.AsCall()
		if !c.IsMemberFunction() {
			if root, segs, computed, ok := chain(e); ok {
				w.ref(root, segs)
				for _, x := range computed {
					w.visit(x)
				}
				return
			}
			if !strings.HasPrefix(c.FunctionName(), "_") && !strings.HasPrefix(c.FunctionName(), "@") {
				w.function(c.FunctionName())
			}
			for _, a := range c.Args() {
				w.visit(a)
			}
			return
		}
		// A namespaced function (hash.sha256(x)) parses as a member call on
		// the namespace; a name the environment or the refused list knows
		// is a function, not a variable.
		if q := qualified(c.Target()); q != "" && w.bound[strings.Split(q, ".")[0]] == 0 {
			full := q + "." + c.FunctionName()
			if _, refused := RefusedFunctions[full]; refused || (w.env.functions[full] && !w.env.known[q]) {
				w.function(full)
				for _, a := range c.Args() {
					w.visit(a)
				}
				return
			}
			if !w.env.known[q] && w.env.namespace(q) {
				w.fail(fmt.Errorf("unknown function %s", full))
				return
			}
		}
		w.function(c.FunctionName())
		w.visit(c.Target())
		for _, a := range c.Args() {
			w.visit(a)
		}
	case celast.ListKind:
		for _, x := range e.AsList().Elements() {
			w.visit(x)
		}
	case celast.MapKind:
		for _, en := range e.AsMap().Entries() {
			me := en.AsMapEntry()
			w.visit(me.Key())
			w.visit(me.Value())
		}
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			w.visit(f.AsStructField().Value())
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		w.visit(c.IterRange())
		w.visit(c.AccuInit())
		vars := []string{c.IterVar(), c.AccuVar()}
		if c.HasIterVar2() {
			vars = append(vars, c.IterVar2())
		}
		for _, v := range vars {
			w.bound[v]++
		}
		w.visit(c.LoopCondition())
		w.visit(c.LoopStep())
		w.visit(c.Result())
		for _, v := range vars {
			w.bound[v]--
		}
	}
}

// EvalError is an evaluation error.
type EvalError struct {
	// Pending is true when the error comes from data that is not there yet
	// (a missing key or field: kro waits for such an expression to become
	// resolvable instead of failing).
	Pending bool
	Err     error
}

func (e *EvalError) Error() string { return e.Err.Error() }
func (e *EvalError) Unwrap() error { return e.Err }

// Eval evaluates the expression with vars bound (decoded JSON: map[string]any,
// []any, string, bool, int64, float64, nil; a collection is a []any). The
// result is in the same model: ints as int64, doubles as float64 (NaN and
// ±Inf are errors), durations as Go duration strings, timestamps as RFC 3339
// UTC strings (as metav1 writes them), an absent optional as nil, and omit()
// as Omit{}. Bytes are an error (encode them, e.g. base64.encode(...)), as a
// uint above math.MaxInt64 and a map key that is not a string are (kro's
// rules). The cost is bounded by DefaultCostLimit; ctx cancels a running
// evaluation. Errors are *EvalError.
func (x *Expression) Eval(ctx context.Context, vars map[string]any) (any, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	act, err := interpreter.NewActivation(vars)
	if err != nil {
		return nil, &EvalError{Err: err}
	}
	out, _, err := x.prog.ContextEval(ctx, act)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, &EvalError{Err: fmt.Errorf("evaluation cancelled: %w", cerr)}
		}
		return nil, &EvalError{Pending: celkro.IsPending(err), Err: err}
	}
	v, err := celkro.ToJSON(out, Omit{})
	if err != nil {
		return nil, &EvalError{Err: err}
	}
	return v, nil
}
