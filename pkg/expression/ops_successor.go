package expression

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"unicode/utf8"
)

// The meanings of DialectDBSP, Δ-controller's successor (l7mp/dbsp), for
// the operators whose meaning differs from Δ-controller's (see Dialect).

// maxVariadicArgs bounds the argument list of @definedOr in the
// successor's dialect (a spec is bounded anyway; this keeps the arity
// table finite).
const maxVariadicArgs = 1 << 16

// opRangeFrom1 implements the successor's @range n: [1, ..., n] (n < 0 is
// an error); [start, end) keeps our meaning.
func opRangeFrom1(c *call, vs []any) (any, error) {
	if len(vs) != 1 {
		return opRange(c, vs)
	}
	n, err := c.integer(vs[0], "argument")
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, c.errorf("argument must be 0 or more, got %d", n)
	}
	if n > maxRange {
		return nil, c.errorf("range of more than %d elements", maxRange)
	}
	out := make([]any, n)
	for i := range n {
		out[i] = i + 1
	}
	return out, nil
}

// opSubstringSQL implements the successor's @substring [s, start] and
// [s, start, length], SQL's SUBSTRING: start counts code points from 1 (0
// is 1 too; a negative start counts from the end, -1 being the last); the
// result has length code points (a negative length is 0), clamped to the
// string.
func opSubstringSQL(c *call, vs []any) (any, error) {
	s, err := c.str(vs[0], "argument 1")
	if err != nil {
		return nil, err
	}
	start, err := c.integer(vs[1], "argument 2")
	if err != nil {
		return nil, err
	}
	n := int64(utf8.RuneCountInString(s))
	switch {
	case start > 0:
		start--
	case start < 0:
		start = max(n+start, 0)
	}
	start = min(start, n)
	end := n
	if len(vs) == 3 {
		length, err := c.integer(vs[2], "argument 3")
		if err != nil {
			return nil, err
		}
		length = max(length, 0)
		if length < n-start {
			end = start + length
		}
	}
	return runeSlice(s, start, end, n), nil
}

// opHashSHA256 implements the successor's @hash: the first 8 bytes of the
// SHA-256 of the value's JSON encoding (encoding/json: compact, map keys
// sorted, <, > and & escaped) in lowercase hex, 16 characters. Values
// encoding/json cannot encode (NaN, ±Inf) are hashed from their canonical
// JSON.
func opHashSHA256(c *call, v any) (any, error) {
	js, err := c.jsonOf(v, "argument")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:8]), nil
}

// opDivTrunc implements the successor's @div: two integers divide with
// truncation toward zero (7 / 2 is 3, -7 / 2 is -3); otherwise the float
// quotient. Division by zero is an error; the one integer quotient that
// overflows (-2⁶³ / -1) is a float.
func opDivTrunc(c *call, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	if isZero(y) {
		return nil, c.errorf("division by zero")
	}
	if x.isInt && y.isInt && !(x.i == math.MinInt64 && y.i == -1) {
		return x.i / y.i, nil
	}
	return c.finite(floatNum(x.float() / y.float()))
}

// opRndInclusive implements the successor's @rnd [min, max]: for two
// integers a uniformly distributed integer with min ≤ r ≤ max, otherwise a
// float with min ≤ r < max; min > max is an error. The source is ctx.Rand
// when set.
func opRndInclusive(c *call, ctx *Context, a, b any) (any, error) {
	x, y, err := c.twoNumbers(a, b)
	if err != nil {
		return nil, err
	}
	var r *rand.Rand
	if ctx != nil {
		r = ctx.Rand
	}
	if x.isInt && y.isInt {
		lo, hi := x.i, y.i
		if lo > hi {
			return nil, c.errorf("empty range [%d, %d]", lo, hi)
		}
		span := uint64(hi) - uint64(lo) + 1 // 0: all of int64
		var u uint64
		switch {
		case span == 0 && r != nil:
			u = r.Uint64()
		case span == 0:
			u = rand.Uint64()
		case r != nil:
			u = r.Uint64N(span)
		default:
			u = rand.Uint64N(span)
		}
		return int64(uint64(lo) + u), nil
	}
	lo, hi := x.float(), y.float()
	if lo > hi {
		return nil, c.errorf("empty range [%s, %s]", formatFloat(lo), formatFloat(hi))
	}
	f := rand.Float64
	if r != nil {
		f = r.Float64
	}
	return c.finite(floatNum(lo + f()*(hi-lo)))
}

// evalSortByComparator implements the successor's @sortBy [comparator,
// list]: a stable sort in which the comparator, evaluated with $$ bound to
// {"a": x, "b": y}, gives -1 when x comes before y, 1 when after and 0 when
// either order will do (an integral float counts as the integer).
func evalSortByComparator(c *call, ctx *Context) (any, error) {
	v, err := c.args[1].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument 2")
	if err != nil {
		return nil, err
	}
	n := int64(len(list))
	if err := c.charge(ctx, n*int64(1+bits.Len64(uint64(n))), n, 16*n); err != nil {
		return nil, err
	}
	out := slices.Clone(list)
	sub := localContext(ctx)
	var cmpErr error
	slices.SortStableFunc(out, func(x, y any) int {
		if cmpErr != nil {
			return 0
		}
		if err := c.charge(ctx, 0, 2, 32); err != nil {
			cmpErr = err
			return 0
		}
		sub.Local = map[string]any{"a": x, "b": y}
		r, err := c.args[0].Eval(sub)
		if err != nil {
			cmpErr = err
			return 0
		}
		k, err := c.comparatorResult(r)
		if err != nil {
			cmpErr = err
			return 0
		}
		return k
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	return out, nil
}

// comparatorResult reads a comparator's result: -1, 0 or 1.
func (c *call) comparatorResult(v any) (int, error) {
	if n, _, ok := numberOf(v); ok {
		switch {
		case n.isInt && n.i >= -1 && n.i <= 1:
			return int(n.i), nil
		case !n.isInt && (n.f == -1 || n.f == 0 || n.f == 1):
			return int(n.f), nil
		}
	}
	return 0, c.errorf("the comparator must give -1, 0 or 1, got %s (in the dbsp dialect, a controller written with targets:, "+
		`@sortBy takes a comparator of $$.a and $$.b, e.g. {"@switch": [[{"@lt": ["$$.a.k", "$$.b.k"]}, -1], [{"@gt": ["$$.a.k", "$$.b.k"]}, 1], [true, 0]]}, not a key)`, describe(v))
}

// evalFirstDefined implements the successor's @definedOr [x, y, ...]: the
// first argument that evaluates to a value other than null, evaluated in
// order and no further; an argument whose evaluation fails counts as null,
// except when the evaluation ran out of its budget or was cancelled. null
// when there is none.
func evalFirstDefined(c *call, ctx *Context) (any, error) {
	for _, a := range c.args {
		v, err := a.Eval(ctx)
		if err != nil {
			if stopsEvaluation(err, ctx) {
				return nil, err
			}
			continue
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, nil
}

// stopsEvaluation reports whether err ends the whole evaluation: a budget
// exceeded or a cancelled run.
func stopsEvaluation(err error, ctx *Context) bool {
	var be *BudgetError
	if errors.As(err, &be) {
		return true
	}
	if b := budgetOf(ctx); b != nil && b.cancelled() != nil {
		return true
	}
	return false
}
