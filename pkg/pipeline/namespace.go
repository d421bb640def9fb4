package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

// NamespaceLocal reports whether p only ever combines objects of one
// namespace, so that an operator sharded by namespace (spec.sharding:
// Namespace) computes on each member, over the namespaces it holds, exactly
// the part of the output that the whole pipeline computes from them. It
// returns nil, or an *expression.Error whose Path names the offending stage
// and name, e.g. `spec.controllers[0].pipeline[1]["@gather"]`, and whose
// message says what is missing and how to fix it.
//
// The check is static and errs on the safe side: it may refuse a pipeline
// that is in fact namespace-local, never the other way round. It tracks,
// stage by stage, the namespace paths of the documents: the singular paths
// whose value is the namespace of the objects a document was made from,
// `$.metadata.namespace` on a source document and `$.<Kind>.metadata.namespace`
// for every source on the compound document of a @join. The rules:
//
//   - A single source starts with the path `$.metadata.namespace`.
//   - @join over sources S1..Sn: the conjunctive @eq terms of the condition
//     (the condition itself or, recursively, an operand of @and: those that
//     index the join) that compare `$.<Si>.metadata.namespace` with
//     `$.<Sj>.metadata.namespace` must connect all the sources (e.g. A=B and
//     B=C for three). An @eq under @or, @not or any other operator does not
//     count. The compound document then has the namespace path of every source.
//     Without a group stage or @distinct after it, that is all.
//   - @select keeps the namespace paths.
//   - @unwind (@demux) at X drops the namespace paths that X overlaps (X a
//     prefix of the path or the path a prefix of X).
//   - @project keeps a namespace path only if the projection writes the
//     input's namespace there: a value that is a singular `$` JSONPath equal
//     to, or a prefix of, a namespace path copies it (`"metadata": "$.metadata"`,
//     `"ns": "$.Pod.metadata.namespace"`, `"$.": "$"`), map and list literals
//     nest such copies, and any other value (an operator call, a literal, a
//     `$$` or non-singular query) copies none. A path is kept when some
//     writer (a plain key, a setter or, in the list form, any step's plain key
//     or setter) copies the namespace there and every writer whose path
//     overlaps it copies the namespace there too: a @project that sets
//     metadata.namespace from anything else than the namespace drops the path
//     and a later group stage is refused.
//   - @gather (@mux) and @groupBy: the key must be namespace-keyed: its value
//     determines the namespace. That is a copy of a namespace path (as for
//     @project), a list literal or a map literal with a namespace-keyed
//     element or plain key (not overwritten by a setter), or an @concat
//     list whose leading constant strings are followed by a copy of the
//     namespace that is last or followed by a constant string starting with
//     a character that no namespace holds (e.g. "/", ".", ":"). A key that
//     merely mentions the namespace elsewhere, e.g. {"@eq":
//     ["$.metadata.namespace", "x"]}, is refused. After @gather the
//     namespace paths that the value path overlaps are dropped; after
//     @groupBy the namespace paths are those the key copies, under `$.key`.
//   - @distinct merges equal documents and needs a namespace path.
//
// The rules rely on what Kubernetes guarantees of the objects of
// namespaced kinds, the only ones a namespace-sharded operator runs over:
// every object has a metadata.namespace, an RFC 1123 label (lower-case
// letters, digits and '-').
func (p *Pipeline) NamespaceLocal() error {
	// A branch reads the namespace paths of its source inputs and those
	// common to every writer of a stream it reads (a union may mix them).
	streams := map[string]nsPaths{}
	written := map[string]bool{}
	for _, b := range p.branches {
		var ns nsPaths
		lostAt := ""
		in := make([]nsPaths, len(b.inputs))
		for i, name := range b.inputs {
			if b.source[i] {
				in[i] = nsPaths{{{Name: "metadata"}, {Name: "namespace"}}}
			} else {
				in[i] = streams[name]
			}
		}
		if b.join != nil {
			var err error
			if ns, err = b.join.namespaceLocal(b.inputs, in); err != nil {
				return err
			}
		} else {
			ns = in[0]
		}
		for _, st := range b.stages {
			next, err := st.namespaceLocal(ns, lostAt)
			if err != nil {
				return err
			}
			if len(next) == 0 && len(ns) > 0 {
				lostAt = st.label
			}
			ns = next
		}
		if written[b.output] {
			ns = ns.common(streams[b.output])
		}
		streams[b.output], written[b.output] = ns, true
	}
	return nil
}

// common returns the paths of ps that are also in qs.
func (ps nsPaths) common(qs nsPaths) nsPaths {
	var out nsPaths
	for _, p := range ps {
		if qs.contains(p) {
			out = append(out, p)
		}
	}
	return out
}

// namespaceLocal checks that the join condition ties all inputs to one
// namespace: every input is tied to the first by @eq terms between
// namespace paths of the inputs (in[i] are those of inputs[i], in the order
// of the branch's inputs). It returns the namespace paths of the compound
// document: every input's, under its name.
func (js *joinStage) namespaceLocal(inputs []string, in []nsPaths) (nsPaths, error) {
	nsOf := func(kind string) nsPaths { return in[slices.Index(inputs, kind)] }
	// union-find over the source indexes
	parent := make([]int, len(js.sources))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	for _, eq := range equalities(js.cond, js.sources) {
		if !nsOf(eq.a.kind).contains(eq.a.segs) || !nsOf(eq.b.kind).contains(eq.b.segs) {
			continue
		}
		a, b := find(slices.Index(js.sources, eq.a.kind)), find(slices.Index(js.sources, eq.b.kind))
		parent[a] = b
	}
	first := js.sources[0]
	var loose []string
	for i, s := range js.sources {
		if find(i) != find(0) {
			loose = append(loose, s)
		}
	}
	if len(loose) == 0 {
		var ns nsPaths
		for _, s := range inputs {
			ns = append(ns, nsOf(s).under(expression.Segment{Name: s})...)
		}
		return ns, nil
	}
	return nil, &expression.Error{Path: expression.Field(js.path, opJoin), Err: fmt.Errorf(
		"the join condition does not keep every joined document in one namespace: %s not tied to %s by an equality of metadata.namespace; "+
			"add {\"@eq\": [\"$.%s.metadata.namespace\", \"$.%s.metadata.namespace\"]} to the condition, as the condition itself or under its top-level @and "+
			"(an @eq under @or, @not or another operator does not count), or run the operator without spec.sharding: Namespace",
		kindsAre(loose), first, first, loose[0])}
}

// kindsAre renders kinds in a message: "A is", "A, B are".
func kindsAre(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0] + " is"
	}
	return strings.Join(kinds, ", ") + " are"
}

// isNamespace reports whether segs is metadata.namespace.
func isNamespace(segs []expression.Segment) bool {
	return len(segs) == 2 && !segs[0].IsIndex && segs[0].Name == "metadata" && !segs[1].IsIndex && segs[1].Name == "namespace"
}

// namespaceLocal checks one unary stage given the namespace paths of its
// input (lostAt: the label of the stage that dropped the last of them) and
// returns those of its output.
func (st stage) namespaceLocal(ns nsPaths, lostAt string) (nsPaths, error) {
	switch st.name {
	case opSelect:
		return ns, nil
	case opUnwind, opDemux:
		return ns.without(setterPath(st.arg)), nil
	case opProject:
		return projected(st.arg, ns), nil
	case opGather, opMux, opGroupBy:
		l, _ := st.arg.([]any) // [key, value], checked by Compile
		if len(l) != 2 {
			break
		}
		if len(ns) == 0 {
			return nil, st.lostError(lostAt, "groups documents")
		}
		if !namespaceKeyed(l[0], ns) {
			return nil, st.keyError(l[0], ns)
		}
		if st.name == opGroupBy {
			return ns.copiedBy(l[0]).under(expression.Segment{Name: "key"}), nil
		}
		return ns.without(setterPath(l[1])), nil
	case opDistinct:
		if len(ns) == 0 {
			return nil, st.lostError(lostAt, "merges equal documents")
		}
		return ns, nil
	}
	// Compile knows no other stage (nor other arguments); refuse whatever
	// a new one may do.
	return nil, &expression.Error{Path: st.label, Err: fmt.Errorf("cannot tell whether %s keeps objects of different namespaces apart; run the operator without spec.sharding: Namespace", st.name)}
}

func (st stage) lostError(lostAt, what string) error {
	where := "before this stage"
	if lostAt != "" {
		where = "at " + lostAt
	}
	return &expression.Error{Path: st.label, Err: fmt.Errorf(
		"%s %s, but the documents reaching it no longer hold the namespace of their objects (dropped or overwritten %s), so documents of different namespaces may be combined; "+
			"copy the namespace through (e.g. \"metadata\": \"$.metadata\" in a @project), or run the operator without spec.sharding: Namespace",
		st.name, what, where)}
}

func (st stage) keyError(key any, ns nsPaths) error {
	nsq := ns[0].String()
	k, err := json.Marshal(key)
	if err != nil {
		k = []byte("<key>")
	}
	return &expression.Error{Path: st.label, Err: fmt.Errorf(
		"the %s key does not depend on the namespace of the grouped documents (%s), so one group may hold objects of several namespaces; "+
			"put the namespace into the key, e.g. [%q, %s] or {\"@concat\": [%q, \"/\", ...]}, or run the operator without spec.sharding: Namespace",
		st.name, nsq, nsq, k, nsq)}
}

// nsPath is a singular path (name and index segments) into a document.
type nsPath []expression.Segment

// String renders the path as a JSONPath, e.g. `$.Pod.metadata.namespace`.
func (p nsPath) String() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range p {
		switch {
		case s.IsIndex:
			b.WriteString("[" + strconv.Itoa(s.Index) + "]")
		case isPlainName(s.Name):
			b.WriteString("." + s.Name)
		default:
			b.WriteString("[" + strconv.Quote(s.Name) + "]")
		}
	}
	return b.String()
}

// isPlainName reports whether s is written .s in a JSONPath:
// [A-Za-z_][A-Za-z0-9_]*.
func isPlainName(s string) bool {
	for i, r := range s {
		letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

func segEqual(a, b expression.Segment) bool {
	if a.IsIndex != b.IsIndex {
		return false
	}
	if a.IsIndex {
		return a.Index == b.Index
	}
	return a.Name == b.Name
}

// hasPrefix reports whether q is a prefix of p (or equal).
func (p nsPath) hasPrefix(q nsPath) bool {
	return len(q) <= len(p) && slices.EqualFunc(p[:len(q)], q, segEqual)
}

// overlaps reports whether writing at w may change the value at p: unless
// they part at two different names or two different non-negative indexes.
func (p nsPath) overlaps(w nsPath) bool {
	for i := range min(len(p), len(w)) {
		a, b := p[i], w[i]
		switch {
		case !a.IsIndex && !b.IsIndex && a.Name != b.Name:
			return false
		case a.IsIndex && b.IsIndex && a.Index >= 0 && b.Index >= 0 && a.Index != b.Index:
			return false
		}
	}
	return true
}

// nsPaths is a set of namespace paths.
type nsPaths []nsPath

func (ps nsPaths) contains(p nsPath) bool {
	return slices.ContainsFunc(ps, func(q nsPath) bool { return slices.EqualFunc(p, q, segEqual) })
}

func (ps nsPaths) add(p nsPath) nsPaths {
	if ps.contains(p) {
		return ps
	}
	return append(ps, p)
}

// without drops the paths that writing at w may change; w nil (not a
// path) drops all.
func (ps nsPaths) without(w nsPath) nsPaths {
	if w == nil {
		return nil
	}
	var out nsPaths
	for _, p := range ps {
		if !p.overlaps(w) {
			out = append(out, p)
		}
	}
	return out
}

// under prefixes every path with segs.
func (ps nsPaths) under(segs ...expression.Segment) nsPaths {
	var out nsPaths
	for _, p := range ps {
		out = append(out, append(slices.Clone(nsPath(segs)), p...))
	}
	return out
}

// copiedBy returns the namespace paths of the value of the expression spec
// (relative to that value; an empty path when the value is the namespace)
// on a document whose namespace paths are ps.
func (ps nsPaths) copiedBy(spec any) nsPaths {
	switch v := spec.(type) {
	case string:
		q := query(v)
		if q == nil {
			return nil
		}
		var out nsPaths
		for _, p := range ps {
			if p.hasPrefix(q) {
				out = out.add(slices.Clone(p[len(q):]))
			}
		}
		return out
	case []any:
		var out nsPaths
		for i, e := range v {
			for _, p := range ps.copiedBy(e).under(expression.Segment{Index: i, IsIndex: true}) {
				out = out.add(p)
			}
		}
		return out
	case map[string]any:
		if isCall(v) || len(v) == 0 {
			return nil
		}
		return settle(ps.writers(v))
	}
	return nil
}

// writer is a write of a map literal: a plain key or a setter writes at
// path a value that holds the namespace at the paths copies (relative to
// the map).
type writer struct {
	path   nsPath
	copies nsPaths
}

// writers returns the writes of the map literal m.
func (ps nsPaths) writers(m map[string]any) []writer {
	keys := slices.Sorted(maps.Keys(m))
	var out []writer
	for _, k := range keys {
		v := m[k]
		var w nsPath
		switch {
		case k == "$.":
			w = nsPath{}
		case strings.HasPrefix(k, "$"):
			if w = query(k); w == nil {
				w = nsPath{} // not a setter Compile accepts; assume it writes everything
			}
		default:
			w = nsPath{{Name: k}}
		}
		out = append(out, writer{path: w, copies: ps.copiedBy(v).under(w...)})
	}
	return out
}

// settle returns the paths that some writer copies the namespace to and
// every writer that may change them copies the namespace to as well.
func settle(ws []writer) nsPaths {
	var out nsPaths
	for _, w := range ws {
	next:
		for _, p := range w.copies {
			for _, o := range ws {
				if p.overlaps(o.path) && !o.copies.contains(p) {
					continue next
				}
			}
			out = out.add(p)
		}
	}
	return out
}

// projected returns the namespace paths of the output of a @project with
// argument arg on documents with namespace paths ps. The list form merges
// its steps key by key, so every plain key and setter of every step counts
// as a writer.
func projected(arg any, ps nsPaths) nsPaths {
	switch a := arg.(type) {
	case map[string]any:
		return ps.copiedBy(a)
	case []any:
		var ws []writer
		for _, s := range a {
			m, _ := s.(map[string]any)
			if isCall(m) || len(m) == 0 {
				ws = append(ws, writer{path: nsPath{}})
				continue
			}
			ws = append(ws, ps.writers(m)...)
		}
		return settle(ws)
	}
	return nil
}

// namespaceKeyed reports whether the value of the key expression spec
// determines the namespace, on documents with namespace paths ps.
func namespaceKeyed(spec any, ps nsPaths) bool {
	if len(ps.copiedBy(spec)) > 0 {
		return true
	}
	switch v := spec.(type) {
	case []any:
		return slices.ContainsFunc(v, func(e any) bool { return namespaceKeyed(e, ps) })
	case map[string]any:
		if isCall(v) {
			if arg, ok := v["@concat"]; ok {
				return concatKeyed(arg, ps)
			}
			return false
		}
		for k, e := range v {
			if strings.HasPrefix(k, "$") || shadowed(v, k) {
				continue
			}
			if namespaceKeyed(e, ps) {
				return true
			}
		}
	}
	return false
}

// shadowed reports whether a setter of the map m may write into its plain
// key k.
func shadowed(m map[string]any, k string) bool {
	for s := range m {
		if !strings.HasPrefix(s, "$") || s == "$." {
			continue // the root setter is applied before the plain keys
		}
		if w := query(s); w == nil || w.overlaps(nsPath{{Name: k}}) {
			return true
		}
	}
	return false
}

// concatKeyed reports whether an @concat of the argument list l determines
// the namespace: constant strings, then a copy of the namespace that is
// last or followed by a constant string starting with a character that no
// namespace (an RFC 1123 label) holds.
func concatKeyed(arg any, ps nsPaths) bool {
	l, ok := arg.([]any)
	if !ok || len(l) < 2 {
		return false // a single operand may be the list of operands
	}
	for i, e := range l {
		if _, ok := constString(e); ok {
			continue
		}
		if !ps.copiedBy(e).contains(nsPath{}) {
			return false
		}
		if i == len(l)-1 {
			return true
		}
		sep, ok := constString(l[i+1])
		return ok && sep != "" && !isLabelChar(sep[0])
	}
	return false
}

// constString returns e when it is a string literal of the expression
// language.
func constString(e any) (string, bool) {
	s, ok := e.(string)
	if !ok || strings.HasPrefix(s, "$") || s == "@now" {
		return "", false
	}
	return s, true
}

func isLabelChar(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}

// isCall reports whether the map m is an operator call.
func isCall(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return strings.HasPrefix(k, "@")
	}
	return false
}

// query returns the segments of s when it is a singular JSONPath on $,
// else nil.
func query(s string) nsPath {
	if !strings.HasPrefix(s, "$") {
		return nil
	}
	e, err := expression.Parse(s, "")
	if err != nil {
		return nil
	}
	q, ok := expression.QueryOf(e)
	if !ok || !q.Singular() || q.Root() != "$" {
		return nil
	}
	segs := q.Segments()
	if segs == nil {
		segs = []expression.Segment{}
	}
	return segs
}

// setterPath returns the path written by a stage's path argument (of
// @unwind, or the value of @gather), nil when it is not one.
func setterPath(arg any) nsPath {
	s, _ := arg.(string)
	return query(s)
}
