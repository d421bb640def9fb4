package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// joinStage is `@join <bool expr>` over n >= 2 sources: a chain of n-1
// binary incremental joins, the k-th joining the compound documents of
// sources 0..k-1 with the documents of source k. The full condition is
// evaluated on the complete compound documents of the last join; equalities
// between sources found in the condition index the joins.
//
// With soft kinds (see compileJoin) the sources are joined in another
// order, the other kinds first, and each soft kind by a dbsp.LeftJoin.
type joinStage struct {
	path    string
	sources []string              // in join order
	cond    expression.Expression // the join condition, kept for the static checks (see NamespaceLocal)
	joins   []binaryOp
	max     int          // bound of each join's step output; 0: none
	inputs  []*dbsp.ZSet // the left input of each join in the last step
}

// binaryOp is an incremental binary operator of the join chain: a
// *dbsp.Join or a *dbsp.LeftJoin.
type binaryOp interface {
	Step(dl, dr *dbsp.ZSet) (*dbsp.ZSet, error)
	Snapshot(left, right *dbsp.ZSet) (*dbsp.ZSet, error)
	SetMaxOutput(n int)
	Reset()
}

// keyPart is one side of an equality in a join condition: the value at
// path segs in the document of the source kind.
type keyPart struct {
	kind string
	segs []expression.Segment
}

// equality is an `@eq` of two singular JSONPaths rooted at different
// sources, a earlier in the source order than b.
type equality struct{ a, b keyPart }

// compileJoin compiles the @join stage at stagePath: a condition, or
// [condition, options] (see joinOptions) for a left join.
func compileJoin(arg any, stagePath string, sources []string, ev *evaluator) (*joinStage, error) {
	joinPath := expression.Field(stagePath, opJoin)
	condSpec, condPath := arg, joinPath
	var soft []string
	if l, ok := arg.([]any); ok {
		if len(l) != 2 {
			return nil, &expression.Error{Path: joinPath, Err: fmt.Errorf(
				"@join takes a condition or [condition, {\"soft\": [kind, ...]}], got a list of %d", len(l))}
		}
		var err error
		if soft, err = joinOptions(l[1], expression.Index(joinPath, 1), sources, ev); err != nil {
			return nil, err
		}
		condSpec, condPath = l[0], expression.Index(joinPath, 0)
	}
	cond, err := ev.parse(condSpec, condPath)
	if err != nil {
		return nil, err
	}
	if len(soft) > 0 {
		return compileLeftJoin(cond, stagePath, sources, soft, ev)
	}
	condPath = cond.Path()
	eqs := equalities(cond, sources)
	js := &joinStage{path: stagePath, sources: sources, cond: cond}
	for k := 1; k < len(sources); k++ {
		right := sources[k]
		var lparts, rparts []keyPart
		for _, eq := range eqs {
			if eq.b.kind == right {
				lparts, rparts = append(lparts, eq.a), append(rparts, eq.b)
			}
		}
		var lkey, rkey dbsp.KeyFunc
		if len(lparts) > 0 {
			leftRaw := ""
			if k == 1 {
				leftRaw = sources[0] // the first join's left documents are not compound yet
			}
			lkey, rkey = keyFunc(lparts, leftRaw), keyFunc(rparts, right)
		}
		var combine dbsp.JoinFunc
		switch {
		case k == 1:
			first := sources[0]
			combine = func(l, r dbsp.Document) (dbsp.Document, bool, error) {
				return dbsp.Document{first: l, right: r}, true, nil
			}
		default:
			combine = func(l, r dbsp.Document) (dbsp.Document, bool, error) {
				out := make(dbsp.Document, len(l)+1)
				maps.Copy(out, l)
				out[right] = r
				return out, true, nil
			}
		}
		if k == len(sources)-1 {
			build := combine
			combine = func(l, r dbsp.Document) (dbsp.Document, bool, error) {
				doc, _, _ := build(l, r)
				v, err := ev.eval(cond, doc)
				if err != nil {
					return nil, false, docError(err, doc)
				}
				ok, err := truth(v, condPath, opJoin)
				if err != nil {
					return nil, false, docError(err, doc)
				}
				return doc, ok, nil
			}
		}
		js.joins = append(js.joins, dbsp.NewJoin(lkey, rkey, combine))
	}
	return js, nil
}

// joinOptions checks the options of `@join: [condition, options]` at path
// and returns the soft kinds, in source order. options is a map with
//
//   - soft: a list of source kinds, not all of them, each at most once: the
//     kinds a row of the other sources may lack (a left join);
//   - index: a map from source kinds to expressions, the successor's hint of
//     the join keys; checked (kinds, expressions) and otherwise ignored, as
//     the keys are found in the condition (see equalities).
//
// Errors name the offending path.
func joinOptions(v any, path string, sources []string, ev *evaluator) ([]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &expression.Error{Path: path, Err: fmt.Errorf("@join options must be a map with \"soft\" and/or \"index\", got %s", typeName(v))}
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "soft" && k != "index" {
			return nil, &expression.Error{Path: expression.Field(path, k), Err: fmt.Errorf("unknown @join option %q; the options are \"soft\" and \"index\"", k)}
		}
	}
	if ix, ok := m["index"]; ok {
		ixPath := expression.Field(path, "index")
		im, ok := ix.(map[string]any)
		if !ok {
			return nil, &expression.Error{Path: ixPath, Err: fmt.Errorf("must be a map from source kinds to key expressions, got %s", typeName(ix))}
		}
		for _, k := range slices.Sorted(maps.Keys(im)) {
			if !slices.Contains(sources, k) {
				return nil, &expression.Error{Path: expression.Field(ixPath, k), Err: fmt.Errorf("%q is not a source kind (%s)", k, strings.Join(sources, ", "))}
			}
			if _, err := ev.parse(im[k], expression.Field(ixPath, k)); err != nil {
				return nil, err
			}
		}
	}
	sv, ok := m["soft"]
	if !ok {
		return nil, nil
	}
	softPath := expression.Field(path, "soft")
	l, ok := sv.([]any)
	if !ok {
		return nil, &expression.Error{Path: softPath, Err: fmt.Errorf("must be a list of source kinds, got %s", typeName(sv))}
	}
	set := map[string]bool{}
	for i, e := range l {
		k, ok := e.(string)
		switch {
		case !ok:
			return nil, &expression.Error{Path: expression.Index(softPath, i), Err: fmt.Errorf("must be a source kind (a string), got %s", typeName(e))}
		case !slices.Contains(sources, k):
			return nil, &expression.Error{Path: expression.Index(softPath, i), Err: fmt.Errorf("%q is not a source kind (%s)", k, strings.Join(sources, ", "))}
		case set[k]:
			return nil, &expression.Error{Path: expression.Index(softPath, i), Err: fmt.Errorf("%q is listed twice", k)}
		}
		set[k] = true
	}
	if len(set) == len(sources) {
		return nil, &expression.Error{Path: softPath, Err: errors.New("every source kind is soft; at least one must not be, as the rows of the other kinds are what a left join keeps")}
	}
	var soft []string
	for _, s := range sources {
		if set[s] {
			soft = append(soft, s)
		}
	}
	return soft, nil
}

// compileLeftJoin compiles a @join with soft kinds. The sources are joined
// in the order hard kinds, then soft kinds (each in source order). The
// condition's conjuncts (the operands of its top-level @and, recursively)
// are split: a conjunct naming two or more hard kinds and no soft kind
// filters the rows of the hard kinds (checked at the last inner join); one
// naming at most one hard kind and no soft kind belongs to the first soft
// kind's match condition, so that a row failing it is kept with that kind
// null (SQL's ON); the other conjuncts are the match condition of the last
// soft kind they name, in join order (a conjunct whose kinds cannot be
// told, e.g. one reading "$" whole, belongs to the last soft kind). Each
// soft kind S is joined by a dbsp.LeftJoin: a row with no document of S for
// which S's conjuncts hold yields the row with S null.
func compileLeftJoin(cond expression.Expression, stagePath string, sources, soft []string, ev *evaluator) (*joinStage, error) {
	var order []string
	for _, s := range sources {
		if !slices.Contains(soft, s) {
			order = append(order, s)
		}
	}
	nhard := len(order)
	order = append(order, soft...)
	byKind := map[string][]expression.Expression{} // "" holds the hard conjuncts
	for _, c := range conjuncts(cond) {
		owner, hardKinds := "", 0
		for _, k := range kindsOf(c, sources) {
			if !slices.Contains(soft, k) {
				hardKinds++
			} else if slices.Index(order, k) > slices.Index(order, owner) {
				owner = k
			}
		}
		if owner == "" && hardKinds < 2 {
			// A condition on one hard kind alone is part of the first soft
			// kind's match (as SQL's ON): a row failing it is kept, with
			// the soft kind null, instead of being dropped.
			owner = order[nhard]
		}
		byKind[owner] = append(byKind[owner], c)
	}
	holds := func(cs []expression.Expression, doc dbsp.Document) (bool, error) {
		for _, c := range cs {
			v, err := ev.eval(c, doc)
			if err != nil {
				return false, docError(err, doc)
			}
			ok, err := truth(v, c.Path(), opJoin)
			if err != nil || !ok {
				return false, docErrorOrNil(err, doc)
			}
		}
		return true, nil
	}
	js := &joinStage{path: stagePath, sources: order, cond: cond}
	first := order[0]
	for k := 1; k < len(order); k++ {
		right := order[k]
		leftRaw := ""
		if k == 1 {
			leftRaw = first
		}
		extend := func(l, r dbsp.Document) dbsp.Document {
			// A soft kind with no match is null: an untyped nil, not a
			// nil Document, which expressions would not take for null.
			var rv any
			if r != nil {
				rv = r
			}
			if leftRaw != "" {
				return dbsp.Document{first: l, right: rv}
			}
			out := make(dbsp.Document, len(l)+1)
			maps.Copy(out, l)
			out[right] = rv
			return out
		}
		var cs []expression.Expression
		switch {
		case k == nhard-1:
			cs = byKind[""]
		case k >= nhard:
			cs = byKind[right]
		}
		var lparts, rparts []keyPart
		for _, c := range cs {
			for _, eq := range equalities(c, order) {
				if eq.b.kind == right {
					lparts, rparts = append(lparts, eq.a), append(rparts, eq.b)
				}
			}
		}
		var lkey, rkey dbsp.KeyFunc
		if len(lparts) > 0 {
			lkey, rkey = keyFunc(lparts, leftRaw), keyFunc(rparts, right)
		}
		combine := func(l, r dbsp.Document) (dbsp.Document, bool, error) {
			doc := extend(l, r)
			ok, err := holds(cs, doc)
			return doc, ok, err
		}
		if k < nhard {
			js.joins = append(js.joins, dbsp.NewJoin(lkey, rkey, combine))
			continue
		}
		pad := func(l dbsp.Document) (dbsp.Document, error) { return extend(l, nil), nil }
		js.joins = append(js.joins, dbsp.NewLeftJoin(lkey, rkey, combine, pad))
	}
	return js, nil
}

// docErrorOrNil is docError for a non-nil err.
func docErrorOrNil(err error, doc dbsp.Document) error {
	if err == nil {
		return nil
	}
	return docError(err, doc)
}

// conjuncts returns the operands of cond's top-level @and, recursively, or
// cond itself.
func conjuncts(cond expression.Expression) []expression.Expression {
	op, args, ok := expression.Operator(cond)
	if !ok || op != "@and" || len(args) < 2 {
		return []expression.Expression{cond}
	}
	var out []expression.Expression
	for _, a := range args {
		out = append(out, conjuncts(a)...)
	}
	return out
}

// kindsOf returns the source kinds an expression reads: the first segment
// of each "$" JSONPath in it ("$.Pod.metadata.name" reads Pod). A "$" query
// that does not start with a source kind may read any of them, and makes
// kindsOf return every kind. "$$" queries (the local subject of @map and
// the like) are not counted.
func kindsOf(e expression.Expression, sources []string) []string {
	var out []string
	all := false
	expression.Walk(e, func(x expression.Expression) bool {
		q, ok := expression.QueryOf(x)
		if !ok || q.Root() != "$" {
			return true
		}
		if k := firstName(q); slices.Contains(sources, k) {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
			return true
		}
		all = true
		return true
	})
	if all {
		return sources
	}
	return out
}

// firstName is the name of the first segment of a "$" query written
// `$.Name...` or `$.Name[...`, or "".
func firstName(q *expression.Query) string {
	if segs := q.Segments(); segs != nil {
		if len(segs) > 0 && !segs[0].IsIndex {
			return segs[0].Name
		}
		return ""
	}
	rest, ok := strings.CutPrefix(q.String(), "$.")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// equalities finds the equalities between different sources in a join
// condition: the condition itself or, recursively, the operands of an
// @and. Whenever the condition holds, each of them holds, so they may
// index the join.
func equalities(cond expression.Expression, sources []string) []equality {
	var out []equality
	var visit func(e expression.Expression)
	visit = func(e expression.Expression) {
		op, args, ok := expression.Operator(e)
		if !ok {
			return
		}
		switch {
		case op == "@and":
			for _, a := range args {
				visit(a)
			}
		case op == "@eq" && len(args) == 2:
			a, okA := sourcePath(args[0], sources)
			b, okB := sourcePath(args[1], sources)
			if !okA || !okB || a.kind == b.kind {
				return
			}
			if slices.Index(sources, a.kind) > slices.Index(sources, b.kind) {
				a, b = b, a
			}
			out = append(out, equality{a: a, b: b})
		}
	}
	visit(cond)
	return out
}

// sourcePath recognises a singular JSONPath on $ whose first segment names
// a source kind, e.g. `$.Pod.metadata.labels.app`.
func sourcePath(e expression.Expression, sources []string) (keyPart, bool) {
	q, ok := expression.QueryOf(e)
	if !ok || !q.Singular() || q.Root() != "$" {
		return keyPart{}, false
	}
	segs := q.Segments()
	if len(segs) == 0 || segs[0].IsIndex || !slices.Contains(sources, segs[0].Name) {
		return keyPart{}, false
	}
	return keyPart{kind: segs[0].Name, segs: segs[1:]}, true
}

// keyFunc extracts the join key: the value of the single part, or the list
// of the parts' values. With raw set, documents are plain documents of that
// source kind; otherwise they are compound documents keyed by kind.
func keyFunc(parts []keyPart, raw string) dbsp.KeyFunc {
	get := func(doc dbsp.Document, p keyPart) any {
		if raw != "" {
			return walk(doc, p.segs)
		}
		return walk(doc[p.kind], p.segs)
	}
	if len(parts) == 1 {
		return func(doc dbsp.Document) (any, error) { return get(doc, parts[0]), nil }
	}
	return func(doc dbsp.Document) (any, error) {
		key := make([]any, len(parts))
		for i, p := range parts {
			key[i] = get(doc, p)
		}
		return key, nil
	}
}

// walk follows singular JSONPath segments (RFC 9535 name and index
// selectors; negative indexes count from the end); nil when absent, as the
// expression language's singular queries.
func walk(v any, segs []expression.Segment) any {
	for _, s := range segs {
		if s.IsIndex {
			l, ok := v.([]any)
			if !ok {
				return nil
			}
			i := s.Index
			if i < 0 {
				i += len(l)
			}
			if i < 0 || i >= len(l) {
				return nil
			}
			v = l[i]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[s.Name]
	}
	return v
}

// run steps (or snapshots) the chain of joins. A bounded step that fails
// with a *dbsp.LimitError undoes the joins before it and returns the error
// alone; the failing join left its state untouched.
func (js *joinStage) run(in map[string]*dbsp.ZSet, incremental bool) (*dbsp.ZSet, error) {
	var errs []error
	cur := input(in, js.sources[0])
	for k, j := range js.joins {
		right := input(in, js.sources[k+1])
		var err error
		if !incremental {
			cur, err = j.Snapshot(cur, right)
		} else {
			prev := cur
			cur, err = j.Step(cur, right)
			var le *dbsp.LimitError
			if errors.As(err, &le) {
				js.undoFirst(k, in)
				return nil, err
			}
			js.inputs = append(js.inputs[:k], prev)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return cur, errors.Join(errs...)
}

// undo undoes the last successful step of the whole chain on in.
func (js *joinStage) undo(in map[string]*dbsp.ZSet) {
	js.undoFirst(len(js.joins), in)
}

// undoFirst undoes the last step of the first n joins: each steps again,
// unbounded, on its negated inputs of that step (js.inputs holds their left
// inputs; the right ones are the source deltas of in).
func (js *joinStage) undoFirst(n int, in map[string]*dbsp.ZSet) {
	for k := n - 1; k >= 0; k-- {
		j := js.joins[k]
		j.SetMaxOutput(0)
		_, _ = j.Step(js.inputs[k].Negate(), input(in, js.sources[k+1]).Negate())
		j.SetMaxOutput(js.max)
	}
}

func (js *joinStage) reset() {
	for _, j := range js.joins {
		j.Reset()
	}
}
