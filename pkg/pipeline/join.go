package pipeline

import (
	"errors"
	"maps"
	"slices"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// joinStage is `@join <bool expr>` over n >= 2 sources: a chain of n-1
// binary incremental joins, the k-th joining the compound documents of
// sources 0..k-1 with the documents of source k. The full condition is
// evaluated on the complete compound documents of the last join; equalities
// between sources found in the condition index the joins.
type joinStage struct {
	path    string
	sources []string
	cond    expression.Expression // the join condition, kept for the static checks (see NamespaceLocal)
	joins   []*dbsp.Join
	max     int          // bound of each join's step output; 0: none
	inputs  []*dbsp.ZSet // the left input of each join in the last step
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

// compileJoin compiles the @join stage at stagePath.
func compileJoin(arg any, stagePath string, sources []string, ev *evaluator) (*joinStage, error) {
	cond, err := expression.Parse(arg, expression.Field(stagePath, opJoin))
	if err != nil {
		return nil, err
	}
	condPath := cond.Path()
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
