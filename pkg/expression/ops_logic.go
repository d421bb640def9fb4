package expression

import "errors"

// Logic and comparison operators.

// evalAndOr implements @and (isAnd) and @or: operands are evaluated left to
// right and evaluation stops at the first false (@and) or true (@or)
// operand. Operands must be bools; null counts as false.
func evalAndOr(isAnd bool) evalFunc {
	return func(c *call, ctx *Context) (any, error) {
		if c.spread || len(c.args) == 1 {
			vs, err := c.operands(ctx)
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				b, err := c.truth(v, "operand")
				if err != nil {
					return nil, err
				}
				if b != isAnd {
					return b, nil
				}
			}
			return isAnd, nil
		}
		for i, a := range c.args {
			v, err := a.Eval(ctx)
			if err != nil {
				return nil, err
			}
			b, ok := v.(bool)
			if !ok && v != nil {
				return nil, c.errorf("%s must be a bool, got %s", argName(i, len(c.args)), typeName(v))
			}
			if b != isAnd {
				return b, nil
			}
		}
		return isAnd, nil
	}
}

func opNot(c *call, v any) (any, error) {
	b, err := c.truth(v, "argument")
	if err != nil {
		return nil, err
	}
	return !b, nil
}

// evalCond implements @cond [cond, then, else] and [cond, then] (else is
// null, as in Δ-controller); only the chosen branch is evaluated.
func evalCond(c *call, ctx *Context) (any, error) {
	v, err := c.args[0].Eval(ctx)
	if err != nil {
		return nil, err
	}
	b, err := c.truth(v, "condition")
	if err != nil {
		return nil, err
	}
	if b {
		return c.args[1].Eval(ctx)
	}
	if len(c.args) < 3 {
		return nil, nil
	}
	return c.args[2].Eval(ctx)
}

// parseSwitch parses @switch [[case, value], ...] into args
// case0, value0, case1, value1, ...
func parseSwitch(c *call, arg any, sc scope) error {
	list, ok := arg.([]any)
	if !ok {
		return c.errorf("expects a list of [case, value] pairs, got %s", typeName(arg))
	}
	for i, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return newError(Index(c.path, i), c.op, "case must be a [case, value] pair, got %s", typeName(e))
		}
		p := Index(c.path, i)
		for j, x := range pair {
			ex, err := parse(x, Index(p, j), sc)
			if err != nil {
				return err
			}
			c.args = append(c.args, ex)
		}
	}
	return nil
}

// evalSwitch returns the value of the first case that is true, or null.
func evalSwitch(c *call, ctx *Context) (any, error) {
	for i := 0; i+1 < len(c.args); i += 2 {
		v, err := c.args[i].Eval(ctx)
		if err != nil {
			return nil, err
		}
		b, err := c.truth(v, "case "+itoa(i/2+1))
		if err != nil {
			return nil, err
		}
		if b {
			return c.args[i+1].Eval(ctx)
		}
	}
	return nil, nil
}

// evalDefinedOr implements @definedOr [x, default]: x unless it is null, in
// which case default (evaluated only then).
func evalDefinedOr(c *call, ctx *Context) (any, error) {
	v, err := c.args[0].Eval(ctx)
	if err != nil || v != nil {
		return v, err
	}
	return c.args[1].Eval(ctx)
}

// evalTry evaluates its argument and reports the outcome as a value:
// {"value": v} when it succeeds (v may be null), {"error": msg} when it
// fails, msg being the innermost cause's message without the paths and
// operators of the expressions it passed through (e.g. "division by
// zero"). Running out of the evaluation budget or a cancelled run is not
// caught: it ends the whole evaluation, as elsewhere.
func evalTry(c *call, ctx *Context) (any, error) {
	v, err := c.args[0].Eval(ctx)
	if err == nil {
		if err := c.charge(ctx, 0, 1, 16); err != nil {
			return nil, err
		}
		return map[string]any{"value": v}, nil
	}
	if stopsEvaluation(err, ctx) {
		return nil, err
	}
	cause := err
	for {
		var e *Error
		if !errors.As(cause, &e) || e.Err == nil {
			break
		}
		cause = e.Err
	}
	msg := cause.Error()
	if err := c.charge(ctx, 0, 2, 16+int64(len(msg))); err != nil {
		return nil, err
	}
	return map[string]any{"error": msg}, nil
}

// parseNoop keeps the argument as written, normalized but not parsed.
func parseNoop(c *call, arg any, _ scope) error {
	n, _, err := normalize(arg, 0)
	if err != nil {
		return c.errorf("unsupported argument: %v", err)
	}
	c.noop = newLiteral(c.path, n)
	return nil
}

func evalNoop(c *call, ctx *Context) (any, error) { return c.noop.Eval(ctx) }

// opEq and opNeq compare with DeepEqual, one step per list element and
// map entry compared.
func opEq(c *call, ctx *Context, a, b any) (any, error) {
	eq, err := equal(a, b, budgetOf(ctx))
	if err != nil {
		return nil, c.budgetError(err)
	}
	return eq, nil
}

func opNeq(c *call, ctx *Context, a, b any) (any, error) {
	eq, err := equal(a, b, budgetOf(ctx))
	if err != nil {
		return nil, c.budgetError(err)
	}
	return !eq, nil
}

// compareOp implements @gt, @gte, @lt and @lte with Compare.
func compareOp(ok func(int) bool) func(c *call, a, b any) (any, error) {
	return func(c *call, a, b any) (any, error) {
		r, err := Compare(a, b)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		return ok(r), nil
	}
}
