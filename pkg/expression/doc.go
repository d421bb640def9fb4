// Package expression implements the dcontroller expression language: a JSON
// value in which single-key maps whose key starts with "@" are operator calls,
// strings starting with "$" are JSONPath queries (RFC 9535) on the subject,
// and everything else is a literal. Parse turns a spec value into an
// Expression once; Eval never re-parses.
//
// # Data model
//
// Values are JSON values represented as nil, bool, int64, float64, string,
// []any and map[string]any (see Normalize). Integers stay int64 as long as
// results are exact; floats stay float64. Results may share lists and maps
// with the subject: treat them as read-only (Setter copies on write).
//
// # Syntax
//
//   - {"@op": arg} calls operator @op. A map with several keys of which one
//     starts with "@" is an error. The bare string "@now" calls @now.
//   - "$.a.b", "$.list[0]", "$.items[*].name": JSONPath queries (RFC 9535,
//     github.com/theory/jsonpath) on the global subject $ ("$." is the whole
//     subject too). "$$" (or "$$.") is the local subject (the current
//     element inside list operators) and "$$.name" queries it. A singular
//     query (only name and index selectors) yields the value or null when
//     absent; a query whose other selectors are filters yields the first
//     matched node or null (`$.status.conditions[?(@.type=='Ready')].status`,
//     as in Δ-controller and kubectl); any other query (wildcard, slice,
//     union, descendant) yields the list of matched nodes. Filters also take
//     Δ-controller's `x in ['a', 'b']` (a list of literals).
//   - Lists and maps are literals whose members are expressions. In a map, a
//     key starting with "$" is a setter: {"$.metadata.annotations.a": "x"}
//     writes "x" at that path into the map built from the other keys; an
//     index past the end pads the list with nulls. The setter "$." makes its
//     value (a map) the base of the result, before the plain keys and the
//     other setters.
//   - {"@literal": x} (and {"@noop": x} in Δ-controller's dialect) is x
//     taken literally: the escape for strings starting with "$" or "@".
//
// # Arguments
//
// An operator with one argument takes it bare or in a one-element list
// ({"@len": "$.spec.containers"} equals {"@len": ["$.spec.containers"]});
// a list of another length is itself the argument ({"@len": [1, 2, 3]} is
// 3). Operators with several arguments take a list of exactly that many.
// Variadic operators (@and, @or, @add, @mul, @min, @max, @concat, @list)
// take a list of operands or a single expression that evaluates to the
// operand list; except for @list, a list literal holding a single operand
// that evaluates to a list is spread too ({"@add": [[1, 2]]} is 3).
//
// # Operators
//
// Logic: @and, @or (short-circuit; operands bool, null counts as false),
// @not, @cond [c, then, else], @switch [[case, value], ...],
// @definedOr [x, default], @noop, @literal, @nil, @sqlbool (SQL truth:
// null is false).
//
// Comparison: @eq, @neq (DeepEqual: numbers by value), @gt, @gte, @lt, @lte
// (Compare: numbers or strings).
//
// Arithmetic: @add, @sub, @mul, @div, @mod, @neg, @abs, @floor, @ceil.
// Division or modulo by zero is an error; @div of integers that divide
// evenly is an integer; int64 overflow gives a float.
//
// Lists (null is accepted as the empty list): @map [expr, list],
// @filter [cond, list], @fold [expr, initial, list] ($$ is
// {"acc": accumulator, "item": element}), @sum, @len (lists, maps, strings
// in code points), @min, @max, @in [x, list], @range n | [start, end),
// @any, @all, @none ([cond, list] or a list of bools), @sortBy [key, list]
// (stable), @list, @dict (list of [key, value] pairs, or a map),
// @enumerate ([{"index": i, "value": e}, ...]), @lexmin, @lexmax (by JSON
// text).
//
// Strings: @concat, @split [s, sep], @join [list, sep], @upper, @lower,
// @trim, @replace [s, old, new], @substring [s, start(, end)] (code points,
// clamped), @startswith, @endswith, @contains [s, sub] or [list, x],
// @regexp [pattern, s] (RE2 syntax, unanchored).
//
// Conversion: @string, @int, @float, @bool.
//
// Utility: @exists (a query selects a non-null value), @getField (a path,
// possibly computed), @setField [target, value] (a copy of $ or $$ with the
// value written at target), @isnil, @hash (6
// base36 characters of the MD5 of the JSON, as Δ-controller), @rnd [min, max),
// @now (RFC 3339 UTC), @selector [selector, labels] (Kubernetes label
// selector semantics), @cel "expr" (CEL, github.com/google/cel-go, with
// self bound to the subject: $$ inside a list operator's per-element
// argument, $ elsewhere).
//
// # Dialects
//
// A few operators changed meaning between Δ-controller and its successor
// (l7mp/dbsp): @range, @substring, @hash, @div, @rnd, @sortBy, @definedOr
// and @noop. Parse gives them Δ-controller's meaning (described above);
// ParseWith with DialectDBSP gives the successor's (see Dialect).
//
// # Errors
//
// Every error is an *Error carrying the spec path of the failing expression
// and the operator, rendered as
//
//	spec.controllers[0].pipeline["@project"].metadata.name: unknown operator "@frobnicate"
//	spec.x["@len"]: @len: argument must be a list, string or map, got bool
//
// Field and Index build such paths.
//
// # Budget
//
// An evaluation runs under a Budget of Limits (steps, values built, bytes
// built; DefaultLimits unless the Context carries one) and the context that
// cancels it; exceeding a limit or being cancelled is an *Error at the
// expression where it happened, e.g.
//
//	spec.x["@map"][0]["@range"]: @range: evaluation exceeded its budget of 2097152 values
//
// Run also bounds the size of the result. @cel keeps its own cost limit per
// call and counts what the call cost as steps.
package expression
