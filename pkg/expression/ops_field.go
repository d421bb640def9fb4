package expression

import (
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
)

// The operators below came with Δ-controller's successor (l7mp/dbsp) and
// mean the same in every dialect: @literal, @nil, @sqlbool, @enumerate,
// @lexmin, @lexmax, @getField and @setField.

// parseNullary accepts no argument: null, {} or [] (@nil, and @noop in the
// successor's dialect).
func parseNullary(c *call, arg any, _ scope) error {
	switch a := arg.(type) {
	case nil:
		return nil
	case map[string]any:
		if len(a) == 0 {
			return nil
		}
	case []any:
		if len(a) == 0 {
			return nil
		}
	}
	if c.op == "@noop" {
		return c.errorf(`takes no argument (null or {}) and gives null in the dbsp dialect (a controller written with targets:), got %s; to write a value literally use {"@literal": value}`, typeName(arg))
	}
	return c.errorf("takes no argument (null or {}), got %s", typeName(arg))
}

func evalNil(*call, *Context) (any, error) { return nil, nil }

// opSQLBool implements @sqlbool, the truth value of SQL's WHERE: null is
// false; a bool is itself; a number is true unless 0; a string is false
// when empty, else read as a Go bool ("true", "false", "1", "0", "t",
// "f", ...). Other values are an error.
func opSQLBool(c *call, v any) (any, error) {
	switch x := v.(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case string:
		if x == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(x)
		if err != nil {
			return nil, c.errorf("cannot read the string %q as a bool", x)
		}
		return b, nil
	}
	if n, _, ok := numberOf(v); ok {
		return !isZero(n), nil
	}
	return nil, c.errorf("argument must be a bool, number, string or null, got %s", typeName(v))
}

// evalEnumerate implements @enumerate list: [{"index": 0, "value": e0},
// {"index": 1, "value": e1}, ...]; null is the empty list.
func evalEnumerate(c *call, ctx *Context) (any, error) {
	v, err := c.args[0].Eval(ctx)
	if err != nil {
		return nil, err
	}
	list, err := c.list(v, "argument")
	if err != nil {
		return nil, err
	}
	n := int64(len(list))
	if err := c.charge(ctx, n, 2*n, 32*n); err != nil {
		return nil, err
	}
	out := make([]any, len(list))
	for i, e := range list {
		out[i] = map[string]any{"index": int64(i), "value": e}
	}
	return c.finish(ctx, out, nil)
}

// opLex returns @lexmin (sign -1) or @lexmax (sign 1): the operand whose
// JSON encoding (encoding/json: compact, map keys sorted) is the smallest
// or largest string byte by byte, the first one among equals; null for no
// operand. Strings order as text, numbers by their digits ("10" < "9").
func opLex(sign int) func(c *call, vs []any) (any, error) {
	return func(c *call, vs []any) (any, error) {
		if len(vs) == 0 {
			return nil, nil
		}
		best, bestKey, err := c.lexKey(vs[0], 0)
		if err != nil {
			return nil, err
		}
		for i, v := range vs[1:] {
			_, k, err := c.lexKey(v, i+1)
			if err != nil {
				return nil, err
			}
			if strings.Compare(k, bestKey) == sign {
				best, bestKey = v, k
			}
		}
		return best, nil
	}
}

// lexKey is the ordering key of operand i of @lexmin or @lexmax: its JSON.
func (c *call) lexKey(v any, i int) (any, string, error) {
	js, err := c.jsonOf(v, "operand "+itoa(i+1))
	if err != nil {
		return nil, "", err
	}
	return v, string(js), nil
}

// jsonOf returns the encoding/json encoding of v (compact, map keys sorted,
// <, > and & escaped), or its canonical JSON for values encoding/json
// cannot encode (NaN, ±Inf). A value longer than maxStringLen as JSON is
// an error.
func (c *call) jsonOf(v any, what string) ([]byte, error) {
	canon := canonicalJSON(v) // bounded, unlike json.Marshal
	if len(canon) > maxStringLen {
		return nil, c.errorf("%s longer than %d bytes as JSON", what, maxStringLen)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return []byte(canon), nil
	}
	return js, nil
}

// parseGetField parses @getField path: a string is the JSONPath itself
// (rooted at $ or $$, checked now), any other expression computes the path
// text when evaluated.
func parseGetField(c *call, arg any, sc scope) error {
	if l, ok := arg.([]any); ok && len(l) == 1 {
		arg = l[0]
	}
	s, ok := arg.(string)
	if !ok {
		return c.parseArg(arg, c.path, sc)
	}
	if !strings.HasPrefix(s, "$") {
		return c.errorf("path %q must be a JSONPath rooted at $ (the subject) or $$ (the local subject), e.g. %q", s, "$."+s)
	}
	q, err := parseQuery(s, c.path)
	if err != nil {
		return err
	}
	c.args = []Expression{q}
	return nil
}

// evalGetField implements @getField: the value at the path, as the query
// string itself would give it.
func evalGetField(c *call, ctx *Context) (any, error) {
	if q, ok := c.args[0].(*Query); ok {
		return q.Eval(ctx)
	}
	v, err := c.args[0].Eval(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.str(v, "the computed path")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(s, "$") {
		return nil, c.errorf("the computed path %q must be a JSONPath rooted at $ or $$", s)
	}
	if err := c.charge(ctx, int64(len(s)), 0, 0); err != nil {
		return nil, err
	}
	q, err := parseQuery(s, c.path)
	if err != nil {
		return nil, err
	}
	return q.Eval(ctx)
}

// parseSetField parses @setField [target, value]: target is a literal
// singular JSONPath of names and indexes rooted at $ (the subject) or $$
// (the local subject), never evaluated; value is an expression.
func parseSetField(c *call, arg any, sc scope) error {
	l, ok := arg.([]any)
	if !ok || len(l) != 2 {
		return c.errorf("expects a list [target, value], got %s", describeArg(arg))
	}
	tp := Index(c.path, 0)
	target, ok := l[0].(string)
	if !ok {
		return newError(tp, c.op, "the target must be a JSONPath string such as $.metadata.annotations.x or $$.seen, got %s", typeName(l[0]))
	}
	text := target
	if strings.HasPrefix(target, "$$") {
		c.setLocal = true
		text = target[1:]
	}
	s, err := parseSetter(text, tp)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return newError(tp, c.op, "invalid target %q: %v", target, pe.Err)
		}
		return err
	}
	s.text = target // messages name the target as written
	c.set = s
	return c.parseArg(l[1], Index(c.path, 1), sc)
}

// evalSetField implements @setField: a copy of the subject ($), or of the
// local subject ($$), with the value written at the target (see Setter;
// the subject itself is not modified). A null subject counts as {}.
func evalSetField(c *call, ctx *Context) (any, error) {
	v, err := c.args[0].Eval(ctx)
	if err != nil {
		return nil, err
	}
	var base any
	what := "subject"
	if ctx != nil {
		if c.setLocal {
			base, what = ctx.Local, "local subject"
		} else {
			base = ctx.Subject
		}
	}
	var m map[string]any
	switch b := base.(type) {
	case nil:
	case map[string]any:
		m = b
	default:
		return nil, c.errorf("cannot set %s: the %s must be a map, got %s", c.set.text, what, typeName(base))
	}
	if err := c.charge(ctx, 0, int64(len(m)), 16*int64(len(m))); err != nil {
		return nil, err
	}
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	if err := c.set.set(out, v, budgetOf(ctx)); err != nil {
		return nil, c.budgetError(err) // located at c, like a budget error
	}
	return out, nil
}

// describeArg renders an argument's shape for messages.
func describeArg(v any) string {
	if l, ok := v.([]any); ok {
		return "a list of " + itoa(len(l))
	}
	return typeName(v)
}
