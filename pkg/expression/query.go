package expression

import (
	"fmt"
	"maps"
	"strings"

	"github.com/theory/jsonpath"
	"github.com/theory/jsonpath/spec"
)

// Segment is one step of a singular JSONPath query: a name selector
// (RFC 9535 Section 2.3.1) when IsIndex is false, or an index selector
// (RFC 9535 Section 2.3.3; negative indexes count from the end of the list)
// when IsIndex is true.
type Segment struct {
	Name    string
	Index   int
	IsIndex bool
}

// String renders the segment in JSONPath bracket notation, e.g. `["name"]`
// or `[0]`.
func (s Segment) String() string {
	if s.IsIndex {
		return "[" + spec.Index(s.Index).String() + "]"
	}
	return "[" + spec.Name(s.Name).String() + "]"
}

// Query is a compiled JSONPath query (RFC 9535) on the global subject (root
// "$") or on the local subject (root "$$": the text "$$..." is evaluated as
// "$..." on the local subject). What a query yields depends on its
// selectors, following Δ-controller and kubectl's use of filters:
//
//   - singular (every segment a single name or index selector, e.g.
//     `$.spec.containers[0].name`): the selected value, or nil when it is
//     absent; evaluated by walking the segments directly;
//   - filter-only (single name, index or filter selectors, at least one
//     filter, e.g. `$.status.conditions[?(@.type=='Ready')].status`): the
//     first selected value in document order, or nil when none is selected;
//   - any other (a wildcard, slice, union or descendant segment, e.g.
//     `$.spec.containers[*].name`): the list of the selected values,
//     possibly empty.
//
// "$." and "$$." are the whole subject, as "$" and "$$". Inside filters,
// `x in [a, b]` tests membership in a list of literals (Δ-controller's
// operator; it stands for `(x==a || x==b)`).
//
// A Query is an Expression; it is immutable and safe for concurrent use.
type Query struct {
	text     string
	path     string
	local    bool
	singular bool
	first    bool
	segs     []Segment
	jp       *jsonpath.Path
}

// ParseQuery compiles a JSONPath query text starting with "$" (the global
// subject) or "$$" (the local subject). It fails with an *Error when the text
// is not valid RFC 9535 JSONPath (with the "$." root and the `in` filter
// operator described at Query).
func ParseQuery(query string) (*Query, error) {
	return parseQuery(query, "")
}

func parseQuery(text, path string) (*Query, error) {
	q := &Query{text: text, path: path}
	src := text
	if strings.HasPrefix(text, "$$") {
		q.local = true
		src = text[1:]
	}
	if !strings.HasPrefix(src, "$") {
		return nil, newError(path, "", "invalid JSONPath %q: must start with $", text)
	}
	if src == rootDot {
		// "$." and "$$." are the whole subject (Δ-controller's spelling
		// of the root; RFC 9535 has "$").
		src = "$"
	}
	src, err := rewriteIn(rewriteDashNames(src))
	if err != nil {
		return nil, newError(path, "", "invalid JSONPath %q: %v", text, err)
	}
	jp, err := jsonpath.Parse(src)
	if err != nil {
		return nil, newError(path, "", "invalid JSONPath %q: %v", text, err)
	}
	q.jp = jp
	q.segs, q.singular, q.first = classify(jp.Query())
	return q, nil
}

// classify returns the segments of a singular query (only name and index
// selectors) and whether the query is singular, or, for a query whose
// only other selectors are filters (one selector per segment, no
// descendant segment), first set.
func classify(pq *spec.PathQuery) (segs []Segment, singular, first bool) {
	segs = make([]Segment, 0, len(pq.Segments()))
	for _, s := range pq.Segments() {
		sels := s.Selectors()
		if s.IsDescendant() || len(sels) != 1 {
			return nil, false, false
		}
		switch sel := sels[0].(type) {
		case spec.Name:
			segs = append(segs, Segment{Name: string(sel)})
		case spec.Index:
			segs = append(segs, Segment{Index: int(sel), IsIndex: true})
		case *spec.FilterSelector:
			first = true
		default:
			return nil, false, false
		}
	}
	if first {
		return nil, false, true
	}
	return segs, true, false
}

// String returns the query text as written, e.g. "$$.name".
func (q *Query) String() string { return q.text }

// Path returns the location of the query in the spec ("" when the query was
// built by ParseQuery).
func (q *Query) Path() string { return q.path }

// Root returns "$" for a query on the global subject and "$$" for one on the
// local subject.
func (q *Query) Root() string {
	if q.local {
		return "$$"
	}
	return "$"
}

// Singular reports whether the query has only name and index segments
// (RFC 9535 Section 2.3.5.1 "singular query").
func (q *Query) Singular() bool { return q.singular }

// First reports whether the query is filter-only: it yields the first
// selected value rather than the list (see Query).
func (q *Query) First() bool { return q.first }

// Segments returns the segments of a singular query, or nil when the query
// is not singular.
func (q *Query) Segments() []Segment {
	if !q.singular {
		return nil
	}
	return append([]Segment(nil), q.segs...)
}

// Get evaluates the query on v (which plays the role of the query's root).
// For a singular query it returns the selected value and whether it exists;
// for a filter-only query the first selected value and whether there is
// one; for any other query the list of selected nodes and true.
func (q *Query) Get(v any) (any, bool) {
	if q.singular {
		r, ok := walk(v, q.segs)
		return shallow(r), ok
	}
	if q.first {
		nodes := q.jp.Select(v)
		if len(nodes) == 0 {
			return nil, false
		}
		return shallow(nodes[0]), true
	}
	return q.Select(v), true
}

// Select evaluates the query on v and returns the selected nodes, in
// document order (never nil; empty when nothing matches).
func (q *Query) Select(v any) []any {
	if q.singular {
		r, ok := walk(v, q.segs)
		if !ok {
			return []any{}
		}
		return []any{shallow(r)}
	}
	nodes := q.jp.Select(v)
	out := make([]any, len(nodes))
	for i, n := range nodes {
		out[i] = shallow(n)
	}
	return out
}

// Eval evaluates the query on ctx.Local (root "$$") or ctx.Subject.
//
// Under a budget (Context.Budget), a query that is not singular pays for
// what it selects (one value and 16 bytes per node), and one on the local
// subject also one step per list element and map entry of that subject
// before it runs: the local subject may be a value built by the
// evaluation whose lists and maps are shared many times over, which the
// selection would visit as often.
func (q *Query) Eval(ctx *Context) (any, error) {
	var root any
	if ctx != nil {
		if q.local {
			root = ctx.Local
		} else {
			root = ctx.Subject
		}
	}
	if b := budgetOf(ctx); b != nil && !q.singular {
		if q.local {
			if err := b.visit(root); err != nil {
				return nil, &Error{Path: q.path, Err: err}
			}
		}
		r, _ := q.Get(root)
		if l, ok := r.([]any); ok && !q.first {
			if err := b.charge(0, int64(len(l)), 16*int64(len(l))); err != nil {
				return nil, &Error{Path: q.path, Err: err}
			}
		}
		return r, nil
	}
	r, _ := q.Get(root)
	return r, nil
}

// walk follows singular segments through maps and lists.
func walk(v any, segs []Segment) (any, bool) {
	for _, s := range segs {
		if s.IsIndex {
			l, ok := v.([]any)
			if !ok {
				return nil, false
			}
			i := s.Index
			if i < 0 {
				i += len(l)
			}
			if i < 0 || i >= len(l) {
				return nil, false
			}
			v = l[i]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.Name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// rootDot is Δ-controller's spelling of the root: as a query "$." (and
// "$$.") is the whole subject, as a setter key it is the whole result.
const rootDot = "$."

// Setter writes a value at a singular JSONPath location into an object.
type Setter interface {
	// Set writes value at the setter's location in obj. obj itself is
	// modified in place; maps and lists below it along the path are copied
	// before being modified (copy-on-write), so values shared with other
	// objects are never changed. Missing or null intermediate members are
	// created: a map before a name segment, an empty list before an index
	// segment. An index segment may address an existing element (negative
	// indexes count from the end) or any position at or past the end: the
	// list is padded with nulls up to that position. The root setter "$."
	// replaces the whole content of obj with value, which must be a map
	// (its members are copied into obj, not deep-copied). Set fails with an
	// *Error when an intermediate value has the wrong type, a negative index
	// is out of range, an index exceeds 65535, or "$." is given a
	// value that is not a map.
	Set(obj map[string]any, value any) error
	// String returns the JSONPath text.
	String() string
}

// maxSetterIndex is the largest list index a setter writes: padding a list
// with nulls up to a larger index is refused, so that a typo such as
// `$.y[100000000]` fails instead of allocating gigabytes.
const maxSetterIndex = 1<<16 - 1

// ParseSetter compiles a setter from a JSONPath rooted at "$" made only of
// name and index segments whose first segment is a name, e.g. `$.a.b`,
// `$.a["x.y"]`, `$.spec.list[0]` (RFC 9535 syntax), or from "$." which
// stands for the whole object (Δ-controller's root setter: Set replaces the
// object's content with a map). It fails with an *Error for invalid
// JSONPath, non-singular paths, a "$$" root and the bare "$".
func ParseSetter(path string) (Setter, error) {
	return parseSetter(path, "")
}

func parseSetter(text, path string) (*setter, error) {
	if strings.HasPrefix(text, "$$") {
		return nil, newError(path, "", "invalid setter %q: cannot set into the local subject", text)
	}
	if text == rootDot {
		return &setter{text: text}, nil
	}
	q, err := parseQuery(text, path)
	if err != nil {
		return nil, err
	}
	if !q.singular {
		return nil, newError(path, "", "invalid setter %q: only name and index segments are allowed", text)
	}
	if len(q.segs) == 0 {
		return nil, newError(path, "", "invalid setter %q: must start with a member name (\"$.\" sets the whole object)", text)
	}
	if q.segs[0].IsIndex {
		return nil, newError(path, "", "invalid setter %q: must start with a member name", text)
	}
	return &setter{text: text, segs: q.segs}, nil
}

// setter writes at segs; with no segs it is the root setter "$.".
type setter struct {
	text string
	segs []Segment
}

func (s *setter) String() string { return s.text }

// isRoot reports whether s is the root setter "$.".
func (s *setter) isRoot() bool { return len(s.segs) == 0 }

func (s *setter) Set(obj map[string]any, value any) error {
	if obj == nil {
		return newError("", "", "cannot set %s: object is nil", s.text)
	}
	if err := s.set(obj, value, nil); err != nil {
		return &Error{Err: err}
	}
	return nil
}

// set is Set; the maps and lists it copies or makes are counted to b.
func (s *setter) set(obj map[string]any, value any, b *Budget) error {
	if s.isRoot() {
		m, ok := value.(map[string]any)
		if !ok {
			return fmt.Errorf("cannot set %s: the value must be a map, got %s", s.text, typeName(value))
		}
		if err := b.charge(0, int64(len(m)), 16*int64(len(m))); err != nil {
			return err
		}
		// Clone first: value may be obj itself or share it.
		m = maps.Clone(m)
		clear(obj)
		maps.Copy(obj, m)
		return nil
	}
	first := s.segs[0].Name
	v, err := s.setIn(obj[first], s.segs[1:], value, 1, b)
	if err != nil {
		return err
	}
	obj[first] = v
	return nil
}

// setIn returns a copy of cur with value written at segs.
func (s *setter) setIn(cur any, segs []Segment, value any, depth int, b *Budget) (any, error) {
	if len(segs) == 0 {
		return value, nil
	}
	seg := segs[0]
	if !seg.IsIndex {
		var m map[string]any
		switch c := cur.(type) {
		case nil:
			m = map[string]any{}
		case map[string]any:
			if err := b.charge(0, int64(len(c)), 16*int64(len(c))); err != nil {
				return nil, err
			}
			m = maps.Clone(c)
			if m == nil {
				m = map[string]any{}
			}
		default:
			return nil, fmt.Errorf("cannot set %s: %s is of type %s, not a map", s.text, s.prefix(depth), typeName(cur))
		}
		v, err := s.setIn(m[seg.Name], segs[1:], value, depth+1, b)
		if err != nil {
			return nil, err
		}
		m[seg.Name] = v
		return m, nil
	}
	var l []any
	switch c := cur.(type) {
	case nil:
	case []any:
		l = c
	default:
		return nil, fmt.Errorf("cannot set %s: %s is of type %s, not a list", s.text, s.prefix(depth), typeName(cur))
	}
	i := seg.Index
	if i < 0 {
		i += len(l)
	}
	if i < 0 {
		return nil, fmt.Errorf("cannot set %s: index %d out of range for list of length %d", s.text, seg.Index, len(l))
	}
	if i > maxSetterIndex {
		return nil, fmt.Errorf("cannot set %s: index %d exceeds the largest settable index %d", s.text, seg.Index, maxSetterIndex)
	}
	// Past the end: pad with nulls up to i (Δ-controller's rule).
	n := max(len(l), i+1)
	if err := b.charge(0, int64(n), 16*int64(n)); err != nil {
		return nil, err
	}
	out := make([]any, n)
	copy(out, l)
	v, err := s.setIn(out[i], segs[1:], value, depth+1, b)
	if err != nil {
		return nil, err
	}
	out[i] = v
	return out, nil
}

// prefix renders the first n segments as a JSONPath.
func (s *setter) prefix(n int) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, seg := range s.segs[:n] {
		b.WriteString(seg.String())
	}
	return b.String()
}
