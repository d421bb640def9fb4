package expression

import (
	"maps"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// List operators. Wherever a list is expected, null is accepted as the
// empty list (a missing field in a Kubernetes object usually means an empty
// list).

// maxRange bounds the length of lists built by @range.
const maxRange = 1 << 16

// chargeList counts a list operator's pass over n elements: one step per
// element and perElem values (16 bytes each) built per element.
func (c *call) chargeList(ctx *Context, n int, perElem int64) error {
	return c.charge(ctx, int64(n), perElem*int64(n), 16*perElem*int64(n))
}

// member reports whether list holds an element equal (DeepEqual) to x,
// one step per element and per list element and map entry compared.
func (c *call) member(ctx *Context, x any, list []any) (bool, error) {
	b := budgetOf(ctx)
	if err := c.charge(ctx, int64(len(list)), 0, 0); err != nil {
		return false, err
	}
	for _, e := range list {
		eq, err := equal(x, e, b)
		if err != nil {
			return false, c.budgetError(err)
		}
		if eq {
			return true, nil
		}
	}
	return false, nil
}

// evalMap implements @map [expr, list]: expr evaluated with $$ bound to each
// element.
func evalMap(c *call, ctx *Context) (any, error) {
	v, err := c.args[1].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument 2")
	if err != nil {
		return nil, err
	}
	if err := c.chargeList(ctx, len(list), 1); err != nil {
		return nil, err
	}
	sub := localContext(ctx)
	out := make([]any, len(list))
	for i, e := range list {
		sub.Local = e
		r, err := c.args[0].Eval(sub)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// evalFilter implements @filter [cond, list]: the elements for which cond,
// evaluated with $$ bound to the element, is true.
func evalFilter(c *call, ctx *Context) (any, error) {
	v, err := c.args[1].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument 2")
	if err != nil {
		return nil, err
	}
	if err := c.chargeList(ctx, len(list), 1); err != nil {
		return nil, err
	}
	sub := localContext(ctx)
	out := make([]any, 0, len(list))
	for _, e := range list {
		sub.Local = e
		r, err := c.args[0].Eval(sub)
		if err != nil {
			return nil, err
		}
		b, err := c.truth(r, "condition")
		if err != nil {
			return nil, err
		}
		if b {
			out = append(out, e)
		}
	}
	return out, nil
}

// evalFold implements @fold [expr, initial, list]: the accumulator starts
// as initial and becomes expr evaluated with $$ bound to
// {"acc": accumulator, "item": element} for each element in turn.
func evalFold(c *call, ctx *Context) (any, error) {
	acc, err := c.args[1].Eval(ctx)
	if err != nil {
		return nil, err
	}
	v, err := c.args[2].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument 3")
	if err != nil {
		return nil, err
	}
	// Each element makes a map of two entries for $$.
	if err := c.chargeList(ctx, len(list), 2); err != nil {
		return nil, err
	}
	sub := localContext(ctx)
	for _, e := range list {
		sub.Local = map[string]any{"acc": acc, "item": e}
		if acc, err = c.args[0].Eval(sub); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

func opSum(c *call, v any) (any, error) {
	list, err := c.list(v, "argument")
	if err != nil {
		return nil, err
	}
	return opAdd(c, list)
}

// opLen is the number of elements of a list or map, or of characters (Unicode
// code points) of a string; 0 for null.
func opLen(c *call, v any) (any, error) {
	switch x := v.(type) {
	case []any:
		return int64(len(x)), nil
	case string:
		return int64(utf8.RuneCountInString(x)), nil
	case map[string]any:
		return int64(len(x)), nil
	case nil:
		return int64(0), nil
	}
	return nil, c.errorf("argument must be a list, string or map, got %s", typeName(v))
}

func opMin(c *call, vs []any) (any, error) { return c.extreme(vs, -1) }
func opMax(c *call, vs []any) (any, error) { return c.extreme(vs, 1) }

// extreme returns the least (sign -1) or greatest (sign 1) operand by
// Compare; null for no operands.
func (c *call) extreme(vs []any, sign int) (any, error) {
	if len(vs) == 0 {
		return nil, nil
	}
	best := vs[0]
	if len(vs) == 1 {
		if _, err := Compare(best, best); err != nil {
			return nil, c.errorf("%v", err)
		}
	}
	for _, v := range vs[1:] {
		r, err := Compare(v, best)
		if err != nil {
			return nil, c.errorf("%v", err)
		}
		if r*sign > 0 {
			best = v
		}
	}
	return best, nil
}

// opIn implements @in [x, list]: whether x equals (DeepEqual) an element of
// the list, or is a key of a map.
func opIn(c *call, ctx *Context, x, l any) (any, error) {
	switch coll := l.(type) {
	case []any:
		return c.member(ctx, x, coll)
	case map[string]any:
		k, ok := x.(string)
		if !ok {
			return false, nil
		}
		_, found := coll[k]
		return found, nil
	case nil:
		return false, nil
	}
	return nil, c.errorf("argument 2 must be a list or map, got %s", typeName(l))
}

// opRange implements @range n (0, ..., n-1) and @range [start, end)
// (start, ..., end-1).
func opRange(c *call, vs []any) (any, error) {
	var start, end int64
	var err error
	if len(vs) == 1 {
		if end, err = c.integer(vs[0], "argument"); err != nil {
			return nil, err
		}
	} else {
		if start, err = c.integer(vs[0], "argument 1"); err != nil {
			return nil, err
		}
		if end, err = c.integer(vs[1], "argument 2"); err != nil {
			return nil, err
		}
	}
	if end <= start {
		return []any{}, nil
	}
	if end-start > maxRange || end-start < 0 {
		return nil, c.errorf("range of more than %d elements", maxRange)
	}
	out := make([]any, 0, end-start)
	for i := start; i < end; i++ {
		out = append(out, i)
	}
	return out, nil
}

// parseQuantifier parses @any, @all and @none: a two-element list is
// [cond, list] with cond evaluated on each element as $$; anything else is a
// single argument (bare or in a one-element list) evaluating to a list of
// bools.
func parseQuantifier(c *call, arg any, sc scope) error {
	if l, ok := arg.([]any); ok {
		switch len(l) {
		case 2:
			c.cond = true
			cond, err := parse(l[0], Index(c.path, 0), sc.withLocal(true))
			if err != nil {
				return err
			}
			list, err := parse(l[1], Index(c.path, 1), sc)
			if err != nil {
				return err
			}
			c.args = []Expression{cond, list}
			return nil
		case 1:
			return c.parseArg(l[0], Index(c.path, 0), sc)
		}
	}
	return c.parseArg(arg, c.path, sc)
}

// evalQuantifier implements @any (some true), @all (all true) and @none (no
// true); evaluation stops as soon as the answer is known. An empty list gives
// false for @any and true for @all and @none.
func evalQuantifier(c *call, ctx *Context) (any, error) {
	stopOn, result := true, true // @any: stop on true, return true
	switch c.op {
	case "@all":
		stopOn, result = false, false
	case "@none":
		stopOn, result = true, false
	}
	listArg := c.args[len(c.args)-1]
	v, err := listArg.Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, argName(len(c.args)-1, len(c.args)))
	if err != nil {
		return nil, err
	}
	if err := c.chargeList(ctx, len(list), 0); err != nil {
		return nil, err
	}
	var sub *Context
	if c.cond {
		sub = localContext(ctx)
	}
	for _, e := range list {
		if c.cond {
			sub.Local = e
			if e, err = c.args[0].Eval(sub); err != nil {
				return nil, err
			}
		}
		b, err := c.truth(e, "element")
		if err != nil {
			return nil, err
		}
		if b == stopOn {
			return result, nil
		}
	}
	return !result, nil
}

// evalSortBy implements @sortBy [keyExpr, list]: a stable ascending sort by
// the key (Compare) computed with $$ bound to each element.
func evalSortBy(c *call, ctx *Context) (any, error) {
	v, err := c.args[1].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument 2")
	if err != nil {
		return nil, err
	}
	// Keys and the result take two values per element; the sort about
	// n·log2(n) steps.
	n := int64(len(list))
	if err := c.charge(ctx, n*int64(1+bits.Len64(uint64(n))), 2*n, 32*n); err != nil {
		return nil, err
	}
	type keyed struct{ key, elem any }
	ks := make([]keyed, len(list))
	sub := localContext(ctx)
	for i, e := range list {
		sub.Local = e
		k, err := c.args[0].Eval(sub)
		if err != nil {
			return nil, err
		}
		ks[i] = keyed{k, e}
	}
	if len(ks) == 1 {
		if _, err := Compare(ks[0].key, ks[0].key); err != nil {
			return nil, c.errorf("sort key: %v", err)
		}
	}
	var cmpErr error
	slices.SortStableFunc(ks, func(a, b keyed) int {
		r, err := Compare(a.key, b.key)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		return r
	})
	if cmpErr != nil {
		return nil, c.errorf("sort key: %v", cmpErr)
	}
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k.elem
	}
	return out, nil
}

// opList returns its operands as a list.
func opList(_ *call, vs []any) (any, error) {
	return append(make([]any, 0, len(vs)), vs...), nil
}

// parseDict parses the @dict argument. A one-element list is unwrapped only
// when its element is not itself a list, so that a single pair
// `[["k", "v"]]` keeps meaning a list of one pair.
func parseDict(c *call, arg any, sc scope) error {
	if l, ok := arg.([]any); ok && len(l) == 1 {
		if _, inner := l[0].([]any); !inner {
			return c.parseArg(l[0], Index(c.path, 0), sc)
		}
	}
	return c.parseArg(arg, c.path, sc)
}

// opDict builds a map from a list of [key, value] pairs (later pairs win)
// or copies a map.
func opDict(c *call, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		maps.Copy(out, x)
		return out, nil
	case nil:
		return map[string]any{}, nil
	case []any:
		out := make(map[string]any, len(x))
		for i, e := range x {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return nil, c.errorf("element %d must be a [key, value] pair, got %s", i+1, typeName(e))
			}
			k, ok := pair[0].(string)
			if !ok {
				return nil, c.errorf("element %d: key must be a string, got %s", i+1, typeName(pair[0]))
			}
			out[k] = pair[1]
		}
		return out, nil
	}
	return nil, c.errorf("argument must be a list of [key, value] pairs or a map, got %s", typeName(v))
}
