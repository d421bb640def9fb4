package expression

import (
	"strconv"
)

// operators is the operator table, filled in init to break the
// initialization cycle between parsing and the operators that parse.
var operators map[string]*opDef

func init() {
	fixed := func(min, max int, eval evalFunc) *opDef {
		return &opDef{form: formFixed, min: min, max: max, eval: eval}
	}
	variadic := func(flatten bool, eval evalFunc) *opDef {
		return &opDef{form: formVariadic, flatten: flatten, eval: eval}
	}
	elem := func(n int, eval evalFunc) *opDef {
		return &opDef{form: formFixed, min: n, max: n, elemArg: true, eval: eval}
	}
	special := func(parse func(c *call, arg any, sc scope) error, eval evalFunc) *opDef {
		return &opDef{form: formSpecial, parse: parse, eval: eval}
	}
	withPrepare := func(d *opDef, prepare func(c *call) error) *opDef {
		d.prepare = prepare
		return d
	}
	withHint := func(d *opDef, hint string) *opDef {
		d.arityHint = hint
		return d
	}
	operators = map[string]*opDef{
		// logic
		"@and":       variadic(true, evalAndOr(true)),
		"@or":        variadic(true, evalAndOr(false)),
		"@not":       fixed(1, 1, unary(opNot)),
		"@cond":      fixed(2, 3, evalCond),
		"@switch":    special(parseSwitch, evalSwitch),
		"@definedOr": withHint(fixed(2, 2, evalDefinedOr), `for a chain of defaults nest the calls: {"@definedOr": [a, {"@definedOr": [b, c]}]} (a controller written with targets: takes [a, b, c])`),
		"@try":       fixed(1, 1, evalTry),
		"@noop":      special(parseNoop, evalNoop),
		"@literal":   special(parseNoop, evalNoop),
		"@nil":       special(parseNullary, evalNil),
		"@sqlbool":   fixed(1, 1, unary(opSQLBool)),

		// comparison
		"@eq":  fixed(2, 2, binaryCtx(opEq)),
		"@neq": fixed(2, 2, binaryCtx(opNeq)),
		"@gt":  fixed(2, 2, binary(compareOp(func(r int) bool { return r > 0 }))),
		"@gte": fixed(2, 2, binary(compareOp(func(r int) bool { return r >= 0 }))),
		"@lt":  fixed(2, 2, binary(compareOp(func(r int) bool { return r < 0 }))),
		"@lte": fixed(2, 2, binary(compareOp(func(r int) bool { return r <= 0 }))),

		// arithmetic
		"@add":   variadic(true, evalOperands(opAdd)),
		"@sub":   fixed(2, 2, binary(opSub)),
		"@mul":   variadic(true, evalOperands(opMul)),
		"@div":   fixed(2, 2, binary(opDiv)),
		"@mod":   fixed(2, 2, binary(opMod)),
		"@neg":   fixed(1, 1, unary(opNeg)),
		"@abs":   fixed(1, 1, unary(opAbs)),
		"@floor": fixed(1, 1, unary(opFloor)),
		"@ceil":  fixed(1, 1, unary(opCeil)),

		// lists
		"@map":       elem(2, evalMap),
		"@filter":    elem(2, evalFilter),
		"@fold":      elem(3, evalFold),
		"@sum":       fixed(1, 1, unary(opSum)),
		"@len":       fixed(1, 1, unary(opLen)),
		"@min":       variadic(true, evalOperands(opMin)),
		"@max":       variadic(true, evalOperands(opMax)),
		"@in":        fixed(2, 2, binaryCtx(opIn)),
		"@range":     fixed(1, 2, nary(opRange)),
		"@any":       special(parseQuantifier, evalQuantifier),
		"@all":       special(parseQuantifier, evalQuantifier),
		"@none":      special(parseQuantifier, evalQuantifier),
		"@sortBy":    elem(2, evalSortBy),
		"@enumerate": fixed(1, 1, evalEnumerate),
		"@lexmin":    variadic(true, evalOperands(opLex(-1))),
		"@lexmax":    variadic(true, evalOperands(opLex(1))),
		"@list":      variadic(false, evalOperands(opList)),
		"@dict":      special(parseDict, unary(opDict)),

		// strings
		"@concat":     variadic(true, evalOperands(opConcat)),
		"@split":      fixed(2, 2, binaryCtx(opSplit)),
		"@join":       fixed(2, 2, binary(opJoin)),
		"@upper":      fixed(1, 1, unary(opUpper)),
		"@lower":      fixed(1, 1, unary(opLower)),
		"@trim":       fixed(1, 1, unary(opTrim)),
		"@replace":    fixed(3, 3, nary(opReplace)),
		"@substring":  fixed(2, 3, nary(opSubstring)),
		"@startswith": fixed(2, 2, binary(opStartsWith)),
		"@endswith":   fixed(2, 2, binary(opEndsWith)),
		"@contains":   fixed(2, 2, binaryCtx(opContains)),
		"@regexp":     withPrepare(fixed(2, 2, binary(opRegexp)), prepareRegexp),

		// conversion
		"@string": fixed(1, 1, unary(opString)),
		"@int":    fixed(1, 1, unary(opInt)),
		"@float":  fixed(1, 1, unary(opFloat)),
		"@bool":   fixed(1, 1, unary(opBool)),

		// utility
		"@exists":   fixed(1, 1, evalExists),
		"@getField": special(parseGetField, evalGetField),
		"@setField": special(parseSetField, evalSetField),
		"@isnil":    fixed(1, 1, unary(opIsNil)),
		"@hash":     fixed(1, 1, unary(opHash)),
		"@rnd":      {form: formFixed, min: 2, max: 2, eval: binaryCtx(opRnd), nondeterministic: true},
		"@now":      {form: formSpecial, parse: parseNow, eval: evalNow, nondeterministic: true},
		"@selector": withPrepare(fixed(2, 2, binary(opSelector)), prepareSelector),
		"@cel":      special(parseCEL, evalCEL),
	}
	// The successor's meanings (see Dialect).
	successorOperators = map[string]*opDef{
		"@range":     fixed(1, 2, nary(opRangeFrom1)),
		"@substring": fixed(2, 3, nary(opSubstringSQL)),
		"@hash":      fixed(1, 1, unary(opHashSHA256)),
		"@div":       fixed(2, 2, binary(opDivTrunc)),
		"@rnd":       {form: formFixed, min: 2, max: 2, eval: binaryCtx(opRndInclusive), nondeterministic: true},
		"@sortBy":    elem(2, evalSortByComparator),
		"@definedOr": fixed(1, maxVariadicArgs, evalFirstDefined),
		"@noop":      special(parseNullary, evalNil),
	}
}

// Operators returns the names of all operators of every dialect, sorted.
func Operators() []string { return operatorNames() }

// The wrappers below evaluate the arguments, apply the operator and count
// its result as built (see call.account): the strings, lists and maps an
// operator returns are new, or few enough when shared that counting them
// errs on the safe side.

// unary evaluates the single argument and applies f.
func unary(f func(c *call, v any) (any, error)) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		v, err := c.args[0].Eval(ctx)
		if err != nil {
			return nil, err
		}
		r, err := f(c, v)
		return c.finish(ctx, r, err)
	}
}

// binary evaluates both arguments and applies f.
func binary(f func(c *call, a, b any) (any, error)) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		a, err := c.args[0].Eval(ctx)
		if err != nil {
			return nil, err
		}
		b, err := c.args[1].Eval(ctx)
		if err != nil {
			return nil, err
		}
		r, err := f(c, a, b)
		return c.finish(ctx, r, err)
	}
}

// binaryCtx is binary for operators that need the context.
func binaryCtx(f func(c *call, ctx *Context, a, b any) (any, error)) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		a, err := c.args[0].Eval(ctx)
		if err != nil {
			return nil, err
		}
		b, err := c.args[1].Eval(ctx)
		if err != nil {
			return nil, err
		}
		r, err := f(c, ctx, a, b)
		return c.finish(ctx, r, err)
	}
}

// nary evaluates all (fixed) arguments and applies f.
func nary(f func(c *call, vs []any) (any, error)) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		vs, err := c.evalArgs(ctx)
		if err != nil {
			return nil, err
		}
		r, err := f(c, vs)
		return c.finish(ctx, r, err)
	}
}

// evalOperands evaluates the operands of a variadic call and applies f,
// one step per operand.
func evalOperands(f func(c *call, vs []any) (any, error)) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		vs, err := c.operands(ctx)
		if err != nil {
			return nil, err
		}
		if err := c.charge(ctx, int64(len(vs)), 0, 0); err != nil {
			return nil, err
		}
		r, err := f(c, vs)
		return c.finish(ctx, r, err)
	}
}

// finish passes an operator's result on after counting it as built (see
// call.account).
func (c *call) finish(ctx *Context, v any, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if err := c.account(ctx, v); err != nil {
		return nil, err
	}
	return v, nil
}

func (c *call) evalArgs(ctx *Context) ([]any, error) {
	vs := make([]any, len(c.args))
	for i, a := range c.args {
		v, err := a.Eval(ctx)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return vs, nil
}

// operands returns the operand values of a variadic call: the elements of
// the list its single argument evaluates to (spread form), or the values of
// its arguments, where a single list operand is spread for flattening
// operators.
func (c *call) operands(ctx *Context) ([]any, error) {
	if c.spread {
		v, err := c.args[0].Eval(ctx)
		if err != nil {
			return nil, err
		}
		return c.list(v, "argument")
	}
	vs, err := c.evalArgs(ctx)
	if err != nil {
		return nil, err
	}
	if c.def.flatten && len(vs) == 1 {
		if l, ok := vs[0].([]any); ok {
			return l, nil
		}
	}
	return vs, nil
}

// argName names argument i (0-based) of an n-argument call in messages.
func argName(i, n int) string {
	if n == 1 {
		return "argument"
	}
	return "argument " + strconv.Itoa(i+1)
}

// list returns v as a list; null is the empty list.
func (c *call) list(v any, what string) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case nil:
		return nil, nil
	}
	return nil, c.errorf("%s must be a list, got %s", what, typeName(v))
}

// str returns v as a string.
func (c *call) str(v any, what string) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", c.errorf("%s must be a string, got %s", what, typeName(v))
}

// num returns v as a number.
func (c *call) num(v any, what string) (number, error) {
	if n, _, ok := numberOf(v); ok {
		return n, nil
	}
	return number{}, c.errorf("%s must be a number, got %s", what, typeName(v))
}

// integer returns v as an int64; integral floats are accepted.
func (c *call) integer(v any, what string) (int64, error) {
	n, _, ok := numberOf(v)
	if ok {
		if n.isInt {
			return n.i, nil
		}
		if i, ok := floatToInt(n.f); ok && float64(i) == n.f {
			return i, nil
		}
	}
	return 0, c.errorf("%s must be an integer, got %s", what, describe(v))
}

// truth returns the truth value of a logical operand: a bool, or null which
// counts as false.
func (c *call) truth(v any, what string) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case nil:
		return false, nil
	}
	return false, c.errorf("%s must be a bool, got %s", what, typeName(v))
}

// describe renders a scalar for messages: its type, plus its value for
// numbers.
func describe(v any) string {
	if n, _, ok := numberOf(v); ok {
		return typeName(v) + " " + toString(n.value())
	}
	return typeName(v)
}

// floatToInt converts f to int64 by truncation toward zero when in range.
func floatToInt(f float64) (int64, bool) {
	if f != f || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return 0, false
	}
	return int64(f), true
}

func itoa(i int) string { return strconv.Itoa(i) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// localContext returns a copy of ctx whose Local the caller may set.
func localContext(ctx *Context) *Context {
	if ctx == nil {
		return &Context{}
	}
	cp := *ctx
	return &cp
}
