package expression

// Accessors for compilers that inspect parsed expressions (e.g. the pipeline
// compiler recognising join conditions).

// Operator returns the operator name and parsed arguments of an operator
// call, e.g. "@eq" and its two operands. For a variadic operator given a
// single expression that evaluates to the operand list (e.g.
// `{"@and": "$.conds"}`) args holds that one expression. For @switch args
// are case1, value1, case2, value2, ...; @noop and @now have no args. ok is
// false when e is not an operator call.
func Operator(e Expression) (op string, args []Expression, ok bool) {
	c, ok := e.(*call)
	if !ok {
		return "", nil, false
	}
	return c.op, append([]Expression(nil), c.args...), true
}

// QueryOf returns e as a JSONPath query; ok is false when e is not a query.
func QueryOf(e Expression) (q *Query, ok bool) {
	q, ok = e.(*Query)
	return q, ok
}

// SingularPath recognises a plain singular JSONPath made only of name
// segments, such as `$.Pod.metadata.name` (root "$", segments
// [Pod metadata name]) or `$$.name` (root "$$"). It returns ok false for any
// other expression, including queries with index segments (use QueryOf and
// Query.Segments for those).
func SingularPath(e Expression) (segments []string, root string, ok bool) {
	q, isQuery := e.(*Query)
	if !isQuery || !q.singular {
		return nil, "", false
	}
	segments = make([]string, len(q.segs))
	for i, s := range q.segs {
		if s.IsIndex {
			return nil, "", false
		}
		segments[i] = s.Name
	}
	return segments, q.Root(), true
}

// Literal returns the value of a constant expression (a literal scalar, or
// a list or map literal without queries or operator calls); ok is false for
// anything else. The returned value is a copy.
func Literal(e Expression) (v any, ok bool) {
	l, ok := e.(*literal)
	if !ok {
		return nil, false
	}
	return deepCopy(l.v), true
}

// Children returns the direct sub-expressions of e: list elements, map
// values (setter values after plain values, in key order) and operator
// arguments.
func Children(e Expression) []Expression {
	switch x := e.(type) {
	case *listExpr:
		return append([]Expression(nil), x.elems...)
	case *mapExpr:
		out := append([]Expression(nil), x.vals...)
		for _, s := range x.setters {
			out = append(out, s.value)
		}
		return out
	case *call:
		return append([]Expression(nil), x.args...)
	}
	return nil
}

// Walk calls fn for e and, while fn returns true, for its sub-expressions
// depth first.
func Walk(e Expression, fn func(Expression) bool) {
	if e == nil || !fn(e) {
		return
	}
	for _, c := range children(e) {
		Walk(c, fn)
	}
}

func children(e Expression) []Expression {
	switch x := e.(type) {
	case *listExpr:
		return x.elems
	case *mapExpr:
		if len(x.setters) == 0 {
			return x.vals
		}
		return Children(e)
	case *call:
		return x.args
	}
	return nil
}

// IsDeterministic reports whether e always yields the same result for the
// same subjects: false when it contains @now or @rnd.
func IsDeterministic(e Expression) bool {
	det := true
	Walk(e, func(x Expression) bool {
		if c, ok := x.(*call); ok && c.def.nondeterministic {
			det = false
		}
		return det
	})
	return det
}
