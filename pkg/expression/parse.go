package expression

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/labels"
)

// Parse compiles a spec value into an Expression.
//
// spec is a decoded JSON or YAML value: map[string]any, []any, string,
// bool, nil, or a number (int, int32, int64, float64, json.Number or any
// other Go numeric type); other slices and string-keyed maps are accepted
// and normalized (see Normalize). path is the location of spec in the
// enclosing document, e.g. `spec.controllers[0].pipeline["@project"]`; it
// prefixes every error and is extended with Field and Index for
// sub-expressions.
//
// The rules:
//
//   - A map with a single key starting with "@" is an operator call, the
//     value being its argument; a map with several keys of which one starts
//     with "@" is an error. The bare string "@now" is a call of @now.
//   - A string starting with "$" is a JSONPath query (RFC 9535) on the
//     global subject; one starting with "$$" is a query on the local subject
//     (see Query). Invalid JSONPath is an error.
//   - Lists and maps are literals whose elements are expressions. In a map,
//     a key starting with "$" is a setter: the singular JSONPath (see
//     ParseSetter) at which its value is written into the map built from the
//     plain keys; setters are applied in sorted key order. The root setter
//     "$." is applied first: its value (a map) is the base that the plain
//     keys and the other setters write into.
//   - Everything else is a literal.
//
// All errors are *Error values naming the path and, when relevant, the
// operator: an unknown operator, a wrong number of arguments, an invalid
// JSONPath, regular expression, label selector or CEL expression.
func Parse(spec any, path string) (Expression, error) {
	return parse(spec, path, scope{})
}

// ParseWith is Parse with options: opts.Dialect selects the meaning of the
// operators that differ between dialects (see Dialect).
func ParseWith(spec any, path string, opts ParseOptions) (Expression, error) {
	return parse(spec, path, scope{dialect: opts.Dialect})
}

// Eval evaluates e with subject as the global subject `$` (normalized first,
// see Normalize) and no local subject, under a fresh budget of
// DefaultLimits (see Run).
func Eval(e Expression, subject any) (any, error) {
	if e == nil {
		return nil, &Error{Err: errors.New("nil expression")}
	}
	return Run(e, &Context{Subject: Normalize(subject)})
}

// maxDepth bounds the nesting of expressions.
const maxDepth = 1000

// scope is the parsing context of a sub-expression.
type scope struct {
	// local is true inside the per-element argument of a list operator,
	// where @cel binds self to the local subject.
	local bool
	// depth is the nesting depth.
	depth int
	// dialect selects the operator meanings (see Dialect).
	dialect Dialect
}

func (sc scope) withLocal(local bool) scope {
	sc.local = sc.local || local
	return sc
}

// parse compiles spec at path.
func parse(spec any, path string, sc scope) (Expression, error) {
	sc.depth++
	if sc.depth > maxDepth {
		return nil, newError(path, "", "expression nested more than %d levels deep", maxDepth)
	}
	switch v := spec.(type) {
	case nil, bool, int64:
		return &literal{path: path, v: v}, nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, newError(path, "", "%s is not a finite number (%s)", formatFloat(v), nonFiniteHint)
		}
		return &literal{path: path, v: v}, nil
	case string:
		return parseString(v, path, sc)
	case []any:
		return parseList(v, path, sc)
	case map[string]any:
		return parseMap(v, path, sc)
	case json.Number:
		n, ok := numberFromJSON(v)
		if !ok {
			return nil, newError(path, "", "invalid number %q", string(v))
		}
		return &literal{path: path, v: n}, nil
	}
	if n, _, ok := numberOf(spec); ok {
		if !n.isInt && (math.IsNaN(n.f) || math.IsInf(n.f, 0)) {
			return nil, newError(path, "", "%s is not a finite number (%s)", formatFloat(n.f), nonFiniteHint)
		}
		return &literal{path: path, v: n.value()}, nil
	}
	n, _, err := normalize(spec, 0)
	if err != nil {
		return nil, newError(path, "", "unsupported value of type %T: %v", spec, err)
	}
	if n == nil {
		return &literal{path: path}, nil
	}
	return parse(n, path, sc)
}

func parseString(s, path string, sc scope) (Expression, error) {
	switch {
	case strings.HasPrefix(s, "$"):
		return parseQuery(s, path)
	case s == "@now":
		return parseCall("@now", nil, path, path, sc)
	}
	return &literal{path: path, v: s}, nil
}

func parseList(l []any, path string, sc scope) (Expression, error) {
	elems := make([]Expression, len(l))
	constant := true
	for i, e := range l {
		x, err := parse(e, Index(path, i), sc)
		if err != nil {
			return nil, err
		}
		elems[i] = x
		if _, ok := x.(*literal); !ok {
			constant = false
		}
	}
	if constant {
		vs := make([]any, len(elems))
		for i, e := range elems {
			vs[i] = e.(*literal).v
		}
		return newLiteral(path, vs), nil
	}
	return &listExpr{path: path, elems: elems}, nil
}

func parseMap(m map[string]any, path string, sc scope) (Expression, error) {
	if len(m) == 1 {
		for k, v := range m {
			if strings.HasPrefix(k, "@") {
				return parseCall(k, v, path, Field(path, k), sc)
			}
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	me := &mapExpr{path: path}
	constant := true
	for _, k := range keys {
		kp := Field(path, k)
		if strings.HasPrefix(k, "@") {
			return nil, newError(path, "", "operator %q must be the only key of its map", k)
		}
		x, err := parse(m[k], kp, sc)
		if err != nil {
			return nil, err
		}
		if _, ok := x.(*literal); !ok {
			constant = false
		}
		if strings.HasPrefix(k, "$") {
			s, err := parseSetter(k, kp)
			if err != nil {
				return nil, err
			}
			me.setters = append(me.setters, mapSetter{path: kp, setter: s, value: x})
			continue
		}
		me.keys = append(me.keys, k)
		me.vals = append(me.vals, x)
	}
	if constant && len(me.setters) == 0 {
		out := make(map[string]any, len(me.keys))
		for i, k := range me.keys {
			out[k] = me.vals[i].(*literal).v
		}
		return newLiteral(path, out), nil
	}
	return me, nil
}

// literal is a constant. Lists and maps are copied on every evaluation so
// that callers may modify results.
type literal struct {
	path string
	v    any
	// values and bytes are what a copy of a list or map costs (see
	// Limits).
	values, bytes int64
}

// newLiteral returns the literal list or map v.
func newLiteral(path string, v any) *literal {
	l := &literal{path: path, v: v}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			l.values += int64(len(x))
			l.bytes += 16 * int64(len(x))
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			l.values += int64(len(x))
			l.bytes += 16 * int64(len(x))
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return l
}

func (l *literal) Path() string { return l.path }

func (l *literal) Eval(ctx *Context) (any, error) {
	switch l.v.(type) {
	case []any, map[string]any:
		if err := budgetOf(ctx).charge(0, l.values, l.bytes); err != nil {
			return nil, &Error{Path: l.path, Err: err}
		}
		return deepCopy(l.v), nil
	}
	return l.v, nil
}

// listExpr is a list literal with non-constant elements.
type listExpr struct {
	path  string
	elems []Expression
}

func (l *listExpr) Path() string { return l.path }

func (l *listExpr) Eval(ctx *Context) (any, error) {
	if ctx == nil || ctx.Budget == nil {
		ctx = withDefaultBudget(ctx)
	}
	if err := ctx.Budget.charge(0, int64(len(l.elems)), 16*int64(len(l.elems))); err != nil {
		return nil, &Error{Path: l.path, Err: err}
	}
	out := make([]any, len(l.elems))
	for i, e := range l.elems {
		v, err := e.Eval(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// mapExpr is a map literal with non-constant values or setters.
type mapExpr struct {
	path    string
	keys    []string
	vals    []Expression
	setters []mapSetter
}

type mapSetter struct {
	path   string
	setter *setter
	value  Expression
}

func (m *mapExpr) Path() string { return m.path }

func (m *mapExpr) Eval(ctx *Context) (any, error) {
	if ctx == nil || ctx.Budget == nil {
		ctx = withDefaultBudget(ctx)
	}
	n := int64(len(m.keys) + len(m.setters))
	if err := ctx.Budget.charge(0, n, 16*n); err != nil {
		return nil, &Error{Path: m.path, Err: err}
	}
	out := make(map[string]any, len(m.keys)+len(m.setters))
	setters := m.setters
	// The root setter "$." (first in key order) sets the base map that the
	// plain keys and the other setters then write into.
	if len(setters) > 0 && setters[0].setter.isRoot() {
		if err := m.applySetter(out, setters[0], ctx); err != nil {
			return nil, err
		}
		setters = setters[1:]
	}
	for i, k := range m.keys {
		v, err := m.vals[i].Eval(ctx)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	for _, s := range setters {
		if err := m.applySetter(out, s, ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *mapExpr) applySetter(out map[string]any, s mapSetter, ctx *Context) error {
	v, err := s.value.Eval(ctx)
	if err != nil {
		return err
	}
	if err := s.setter.set(out, v, ctx.Budget); err != nil {
		return &Error{Path: s.path, Err: err}
	}
	return nil
}

// argForm says how an operator's argument spec maps to its arguments.
type argForm int

const (
	// formFixed: between min and max arguments. An operator with min <= 1
	// also takes a single argument bare or wrapped in a one-element list.
	formFixed argForm = iota
	// formVariadic: a list literal of arguments, or a single expression
	// that evaluates to the list of operand values (spread).
	formVariadic
	// formSpecial: opDef.parse decides.
	formSpecial
)

type evalFunc func(c *call, ctx *Context) (any, error)

type opDef struct {
	form     argForm
	min, max int
	// flatten: a variadic call with a single operand that evaluates to a
	// list uses the list's elements as operands.
	flatten bool
	// elemArg: argument 0 is evaluated once per list element with $$ bound
	// to the element.
	elemArg bool
	parse   func(c *call, arg any, sc scope) error
	prepare func(c *call) error
	eval    evalFunc
	// nondeterministic operators (@now, @rnd).
	nondeterministic bool
	// arityHint, if set, follows the message of a call with the wrong
	// number of arguments: what to write instead.
	arityHint string
}

// call is an operator call.
type call struct {
	op       string
	path     string
	def      *opDef
	args     []Expression
	spread   bool     // variadic: args[0] evaluates to the operand list
	cond     bool     // @any/@all/@none: [cond, list] form
	local    bool     // inside a list operator's per-element argument
	noop     *literal // @noop, @literal
	set      *setter  // @setField
	setLocal bool     // @setField: the target is in the local subject ($$)
	dialect  Dialect  // the dialect the call was parsed in
	re       *regexp.Regexp
	sel      labels.Selector
	prog     cel.Program
	// @cel: the names the variables args[i] bind (nil: the one-string
	// form), and whether the kro library is used.
	celVars []string
	celKro  bool
}

func (c *call) Path() string { return c.path }

// Eval counts a step and evaluates the call; without a budget in ctx it
// runs under a fresh one of DefaultLimits.
func (c *call) Eval(ctx *Context) (any, error) {
	if ctx == nil || ctx.Budget == nil {
		ctx = withDefaultBudget(ctx)
	}
	if err := ctx.Budget.step(); err != nil {
		return nil, c.budgetError(err)
	}
	return c.def.eval(c, ctx)
}

// budgetError locates a budget or cancellation error at c.
func (c *call) budgetError(err error) *Error {
	return &Error{Path: c.path, Op: c.op, Err: err}
}

// charge counts work of c to ctx's budget; see Budget.charge.
func (c *call) charge(ctx *Context, steps, values, bytes int64) error {
	if err := budgetOf(ctx).charge(steps, values, bytes); err != nil {
		return c.budgetError(err)
	}
	return nil
}

// account counts the result v of c as built (see Budget.chargeValue).
func (c *call) account(ctx *Context, v any) error {
	if b := budgetOf(ctx); b != nil {
		if err := b.chargeValue(v); err != nil {
			return c.budgetError(err)
		}
	}
	return nil
}

func (c *call) errorf(format string, args ...any) *Error {
	return newError(c.path, c.op, format, args...)
}

// unknownHints say what to write instead of operators that are not in the
// language but appear in operators written for earlier Δ-controller
// releases.
var unknownHints = map[string]string{
	"@merge": `to merge maps into one result in order, use the list form of @project: "@project": [map, map, ...] (each map is merged into the result; a key "$." copies the input)`,
}

// parseCall parses a call of operator name with argument spec arg. mapPath
// is the path of the map holding the call, opPath the path of the call.
func parseCall(name string, arg any, mapPath, opPath string, sc scope) (Expression, error) {
	def, ok := lookupOperator(name, sc.dialect)
	if !ok {
		if hint, ok := unknownHints[name]; ok {
			return nil, newError(mapPath, "", "unknown operator %q; %s", name, hint)
		}
		return nil, newError(mapPath, "", "unknown operator %q", name)
	}
	if needsNormalize(arg) {
		n, _, err := normalize(arg, 0)
		if err != nil {
			return nil, newError(opPath, name, "unsupported argument of type %T: %v", arg, err)
		}
		arg = n
	}
	c := &call{op: name, path: opPath, def: def, local: sc.local, dialect: sc.dialect}
	list, isList := arg.([]any)
	var err error
	switch def.form {
	case formSpecial:
		err = def.parse(c, arg, sc)
	case formVariadic:
		if isList {
			err = c.parseArgs(list, sc)
		} else {
			c.spread = true
			err = c.parseArg(arg, opPath, sc)
		}
	case formFixed:
		switch {
		case def.min <= 1 && isList && len(list) == 1:
			err = c.parseArg(list[0], Index(opPath, 0), sc)
		case def.min <= 1 && def.max == 1:
			err = c.parseArg(arg, opPath, sc)
		case isList && len(list) >= def.min && len(list) <= def.max:
			err = c.parseArgs(list, sc)
		case def.min <= 1 && !isList:
			err = c.parseArg(arg, opPath, sc)
		default:
			return nil, c.arityError(arg)
		}
	}
	if err != nil {
		return nil, err
	}
	if def.prepare != nil {
		if err := def.prepare(c); err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, err
			}
			return nil, c.errorf("%v", err)
		}
	}
	return c, nil
}

func (c *call) arityError(arg any) *Error {
	want := ""
	switch {
	case c.def.min == c.def.max:
		want = plural(c.def.min, "argument")
	default:
		want = itoa(c.def.min) + " to " + plural(c.def.max, "argument")
	}
	hint := ""
	if c.def.arityHint != "" {
		hint = "; " + c.def.arityHint
	}
	if l, ok := arg.([]any); ok {
		return c.errorf("expects %s, got %d%s", want, len(l), hint)
	}
	return c.errorf("expects a list of %s, got %s%s", want, typeName(arg), hint)
}

func (c *call) parseArg(spec any, path string, sc scope) error {
	x, err := parse(spec, path, sc)
	if err != nil {
		return err
	}
	c.args = append(c.args, x)
	return nil
}

func (c *call) parseArgs(list []any, sc scope) error {
	for i, e := range list {
		x, err := parse(e, Index(c.path, i), sc.withLocal(c.def.elemArg && i == 0))
		if err != nil {
			return err
		}
		c.args = append(c.args, x)
	}
	return nil
}
