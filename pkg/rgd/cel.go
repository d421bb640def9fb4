package rgd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	k8scel "k8s.io/apiserver/pkg/cel/library"
)

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
const DefaultCostLimit = 1_000_000

// celInterruptEvery is how many comprehension iterations pass between two
// looks at the evaluation's context.
const celInterruptEvery = 100

// maxResultValues bounds the lists, maps and scalars one evaluation's result
// may hold once converted.
const maxResultValues = 1 << 20

// maxResultDepth bounds the nesting of an evaluation's result.
const maxResultDepth = 100

// RefusedFunctions are the functions of kro's CEL libraries that expressions
// here may not call, each with the reason. Calling one is a compile error
// naming the function.
var RefusedFunctions = map[string]string{
	"runtime.newCondition": "custom status conditions (status.conditions) are not supported",
	"runtime.condition":    "custom status conditions (status.conditions) are not supported",
}

// baseEnv is the environment every RGD expression starts from: the CEL
// standard library; cel-go's two-variable comprehensions, lists, strings,
// bindings, optional types and encoders; the Kubernetes libraries kro
// includes (lists, URLs, regex, quantity, IP, CIDR, semver); and kro's own
// functions (kroFunctions). This is the set kro's environment declares
// (kro's pkg/cel/environment.go), less its runtime library.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{
		ext.TwoVarComprehensions(),
		ext.Lists(),
		ext.Strings(),
		ext.Bindings(),
		cel.OptionalTypes(),
		ext.Encoders(),
		k8scel.Lists(),
		k8scel.URLs(),
		k8scel.Regex(),
		k8scel.Quantity(),
		k8scel.IP(),
		k8scel.CIDR(),
		// kro's docs list semver(string, bool), which needs the
		// library's later version.
		k8scel.SemverLib(k8scel.SemverVersion(math.MaxUint32)),
	}
	opts = append(opts, kroFunctions()...)
	return cel.NewEnv(opts...)
})

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
	base, err := baseEnv()
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
	prog, err := e.env.Program(checked,
		cel.CostLimit(DefaultCostLimit),
		cel.CostTracking(costEstimator{}),
		cel.InterruptCheckFrequency(celInterruptEvery))
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
		msg := err.Error()
		pending := strings.HasPrefix(msg, "no such key") || strings.HasPrefix(msg, "no such attribute")
		return nil, &EvalError{Pending: pending, Err: err}
	}
	n := 0
	v, err := celToNative(out, 0, &n, false)
	if err != nil {
		return nil, &EvalError{Err: err}
	}
	return v, nil
}

// celToNative converts a CEL value to the JSON data model (see Eval).
// bytesOK encodes bytes as standard base64 (as encoding/json would) instead
// of refusing them. n counts the values made, bounded by maxResultValues.
func celToNative(v ref.Val, depth int, n *int, bytesOK bool) (any, error) {
	if depth > maxResultDepth {
		return nil, fmt.Errorf("result nested more than %d levels deep", maxResultDepth)
	}
	if *n++; *n > maxResultValues {
		return nil, fmt.Errorf("result holds more than %d values", maxResultValues)
	}
	switch x := v.(type) {
	case nil, types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("uint %d overflows int64; convert it explicitly, e.g. string(...)", uint64(x))
		}
		return int64(x), nil
	case types.Double:
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("double %v is not a finite number (JSON has no such numbers)", f)
		}
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		if bytesOK {
			return []byte(x), nil
		}
		return nil, errors.New("a bytes value cannot be a field value; encode it explicitly, e.g. base64.encode(...)")
	case types.Duration:
		return x.Duration.String(), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339), nil
	case *types.Optional:
		if !x.HasValue() {
			return nil, nil
		}
		return celToNative(x.GetValue(), depth, n, bytesOK)
	case omitValue:
		return Omit{}, nil
	case *types.Err:
		return nil, x
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is a %s, not a string", k, k.Type().TypeName())
			}
			e, err := celToNative(x.Get(k), depth+1, n, bytesOK)
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		size, ok := x.Size().(types.Int)
		if !ok {
			return nil, errors.New("list of unknown size")
		}
		out := make([]any, 0, int(min(int64(size), maxResultValues)))
		for i := types.Int(0); i < size; i++ {
			e, err := celToNative(x.Get(i), depth+1, n, bytesOK)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s value cannot be a field value", v.Type().TypeName())
}

// costEstimator charges kro's functions by the size of what they make and
// leaves the other functions to the Kubernetes libraries' estimator.
type costEstimator struct{}

func (costEstimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	size := func(v ref.Val) uint64 {
		switch x := v.(type) {
		case types.String:
			return uint64(len(x))
		case types.Bytes:
			return uint64(len(x))
		case traits.Sizer:
			if s, ok := x.Size().(types.Int); ok && s > 0 {
				return uint64(s)
			}
		}
		return 0
	}
	switch function {
	case "json.unmarshal", "json.marshal", "random.seededString", "hash.fnv64a", "hash.sha256", "hash.md5":
		c := 1 + (size(result)+size(args[0]))/10
		return &c
	case "merge", "deepMerge", "lists.setAtIndex", "lists.insertAtIndex", "lists.removeAtIndex":
		c := 1 + size(result)
		return &c
	}
	return (&k8scel.CostEstimator{}).CallCost(function, overloadID, args, result)
}
