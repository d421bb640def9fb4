package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// compileStage compiles a unary stage at stagePath, e.g. `pipeline[1]`.
func compileStage(name string, arg any, stagePath string, ev *evaluator) (dbsp.Operator, error) {
	path := expression.Field(stagePath, name) // the path of the argument
	switch name {
	case opSelect:
		return compileSelect(arg, path, ev)
	case opProject:
		return compileProject(arg, path, ev)
	case opUnwind, opDemux:
		return compileUnwind(name, arg, path, ev)
	case opGather, opMux:
		return compileGather(name, arg, path, ev)
	case opGroupBy:
		return compileGroupBy(arg, path, ev)
	case opDistinct:
		if !nullary(arg) {
			return nil, &expression.Error{Path: path, Op: name, Err: fmt.Errorf(`takes no argument: write {"@distinct": null}, {"@distinct": {}} or the stage "@distinct", got %s`, describeShape(arg))}
		}
		return dbsp.NewDistinct(), nil
	}
	return nil, &expression.Error{Path: stagePath, Err: fmt.Errorf("unknown pipeline stage %q", name)}
}

// nullary reports whether a stage argument is none: null or {}.
func nullary(arg any) bool {
	m, ok := arg.(map[string]any)
	return arg == nil || ok && len(m) == 0
}

// evaluator evaluates the expressions of a pipeline, each on one document
// under a fresh count of Options.EvalLimits (see expression.Run), and
// cancelled with the context of the Process call that runs it.
type evaluator struct {
	// dialect is the dialect the pipeline's expressions are parsed in.
	dialect expression.Dialect
	limits  expression.Limits
	budget  *expression.Budget
	// idle is the budget of runs that are never cancelled.
	idle *expression.Budget
}

// parse parses an expression of the pipeline in its dialect.
func (ev *evaluator) parse(spec any, path string) (expression.Expression, error) {
	return expression.ParseWith(spec, path, expression.ParseOptions{Dialect: ev.dialect})
}

// begin readies the evaluator for a run cancelled with ctx (nil: never).
func (ev *evaluator) begin(ctx context.Context) {
	if ctx == nil || ctx.Done() == nil {
		if ev.idle == nil {
			ev.idle = expression.NewBudget(nil, ev.limits)
		}
		ev.budget = ev.idle
		return
	}
	ev.budget = expression.NewBudget(ctx, ev.limits)
}

// tally returns an empty tally against the run's limits (see
// expression.Tally).
func (ev *evaluator) tally() *expression.Tally {
	if ev.budget == nil {
		return expression.NewBudget(nil, ev.limits).NewTally()
	}
	return ev.budget.NewTally()
}

func (ev *evaluator) eval(e expression.Expression, doc dbsp.Document) (any, error) {
	ev.budget.Reset()
	return expression.Run(e, &expression.Context{Subject: doc, Budget: ev.budget})
}

// truth interprets a condition result: true, or false for false and null.
func truth(v any, path, op string) (bool, error) {
	switch b := v.(type) {
	case bool:
		return b, nil
	case nil:
		return false, nil
	}
	return false, &expression.Error{Path: path, Op: op, Err: fmt.Errorf("condition must be a bool, got %s", typeName(v))}
}

// compileSelect compiles `@select <bool expr>` to a lifted filter
// (linear): documents for which the condition is true pass, false or null
// drop, anything else is an error.
func compileSelect(arg any, path string, ev *evaluator) (dbsp.Operator, error) {
	cond, err := ev.parse(arg, path)
	if err != nil {
		return nil, err
	}
	return dbsp.NewFilter(func(doc dbsp.Document) (bool, error) {
		v, err := ev.eval(cond, doc)
		if err == nil {
			var ok bool
			if ok, err = truth(v, path, opSelect); err == nil {
				return ok, nil
			}
		}
		return false, docError(err, doc)
	}), nil
}

// compileProject compiles `@project <map | list of maps>` to a lifted map
// (linear). The map form evaluates the map expression on the document and
// the result is the output. The list form edits one result in sequence, as
// Δ-controller's "sequential transformation" does: the result starts empty,
// every step is evaluated on the stage's input document (so `$` is the input
// in every step, never an earlier step's result) and merged into the result
// with mergeStep. Every step must evaluate to a map.
func compileProject(arg any, path string, ev *evaluator) (dbsp.Operator, error) {
	var steps []expression.Expression
	var paths []string
	switch a := arg.(type) {
	case map[string]any:
		e, err := ev.parse(a, path)
		if err != nil {
			return nil, err
		}
		steps, paths = append(steps, e), append(paths, path)
	case []any:
		if len(a) == 0 {
			return nil, &expression.Error{Path: path, Op: opProject, Err: fmt.Errorf("needs at least one step")}
		}
		for i, s := range a {
			sp := expression.Index(path, i)
			if _, ok := s.(map[string]any); !ok {
				return nil, &expression.Error{Path: sp, Op: opProject, Err: fmt.Errorf("a step must be a map, got %s", typeName(s))}
			}
			e, err := ev.parse(s, sp)
			if err != nil {
				return nil, err
			}
			steps, paths = append(steps, e), append(paths, sp)
		}
	default:
		return nil, &expression.Error{Path: path, Op: opProject, Err: fmt.Errorf("argument must be a map or a list of maps, got %s", typeName(arg))}
	}
	return dbsp.NewMap(func(doc dbsp.Document) (dbsp.Document, error) {
		var out map[string]any
		for i, step := range steps {
			v, err := ev.eval(step, doc)
			if err != nil {
				return nil, docError(err, doc)
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, docError(&expression.Error{Path: paths[i], Op: opProject, Err: fmt.Errorf("result must be a map, got %s", typeName(v))}, doc)
			}
			if out == nil {
				out = m
				continue
			}
			out = mergeStep(out, m).(map[string]any)
		}
		return out, nil
	}), nil
}

// mergeStep returns the result of merging a list-form @project step's
// value src into the result dst, with the rules of Δ-controller's
// sequential transformation: two maps merge key by key (recursively, a key
// only in one of them is kept as it is), two lists are concatenated (dst's
// elements first), and any other src (a scalar, null, or a value of another
// type than dst's) replaces dst. Neither argument is modified: maps and
// lists along the merged paths are copied.
func mergeStep(dst, src any) any {
	switch s := src.(type) {
	case map[string]any:
		d, ok := dst.(map[string]any)
		if !ok {
			return src
		}
		out := maps.Clone(d)
		if out == nil {
			out = map[string]any{}
		}
		for k, v := range s {
			if old, ok := out[k]; ok {
				out[k] = mergeStep(old, v)
			} else {
				out[k] = v
			}
		}
		return out
	case []any:
		d, ok := dst.([]any)
		if !ok {
			return src
		}
		out := make([]any, 0, len(d)+len(s))
		return append(append(out, d...), s...)
	}
	return src
}

// pathArg is a compiled singular JSONPath argument with its setter.
type pathArg struct {
	query  *expression.Query
	setter expression.Setter
}

func compilePath(arg any, path, op string) (pathArg, error) {
	s, ok := arg.(string)
	if !ok {
		return pathArg{}, &expression.Error{Path: path, Op: op, Err: fmt.Errorf("argument must be a JSONPath string, got %s", typeName(arg))}
	}
	e, err := expression.Parse(s, path)
	if err != nil {
		return pathArg{}, err
	}
	q, ok := expression.QueryOf(e)
	if !ok || !q.Singular() || q.Root() != "$" {
		return pathArg{}, &expression.Error{Path: path, Op: op, Err: fmt.Errorf("argument must be a singular JSONPath on $, got %q", s)}
	}
	setter, err := expression.ParseSetter(s)
	if err != nil {
		return pathArg{}, &expression.Error{Path: path, Op: op, Err: err}
	}
	return pathArg{query: q, setter: setter}, nil
}

// get returns the value at the path, nil when absent.
func (pa pathArg) get(doc dbsp.Document) any {
	v, _ := pa.query.Get(doc)
	return v
}

// with returns a copy of doc with value set at the path; doc is not
// modified (the setter copies on write below the top level).
func (pa pathArg) with(doc dbsp.Document, value any) (dbsp.Document, error) {
	out := maps.Clone(doc)
	if out == nil {
		out = dbsp.Document{}
	}
	if err := pa.setter.Set(out, value); err != nil {
		return nil, err
	}
	return out, nil
}

// compileUnwind compiles `@unwind <path>` (alias @demux) to a lifted
// flat-map (linear): a document whose list at path has n elements becomes n
// documents, the i-th with the list replaced by its i-th element and, in
// Δ-controller's dialect, metadata.name (when it is a string) suffixed with
// "-i" (the successor's dialect changes nothing else: equal outputs add up,
// and @enumerate before the @unwind keeps them apart). A missing, null
// or empty list yields nothing; any other value is an error. What one
// document yields, its outputs counted as trees, must fit in the values
// and bytes of Options.EvalLimits (each output holds the rest of the
// document, so a document with two lists of n elements unwound twice would
// yield n² copies of a list of n), else the document's change is an error
// naming the stage; the count also stops when the run is cancelled.
func compileUnwind(name string, arg any, path string, ev *evaluator) (dbsp.Operator, error) {
	pa, err := compilePath(arg, path, name)
	if err != nil {
		return nil, err
	}
	return dbsp.NewFlatMap(func(doc dbsp.Document) ([]dbsp.Document, error) {
		var list []any
		switch v := pa.get(doc).(type) {
		case nil:
			return nil, nil
		case []any:
			list = v
		default:
			return nil, docError(&expression.Error{Path: path, Op: name, Err: fmt.Errorf("%s is a %s, not a list", pa.query, typeName(v))}, doc)
		}
		md, _ := doc["metadata"].(map[string]any)
		docName, hasName := md["name"].(string)
		hasName = hasName && !ev.dialect.Successor()
		out := make([]dbsp.Document, 0, len(list))
		tally := ev.tally()
		for i, elem := range list {
			d, err := pa.with(doc, elem)
			if err != nil {
				return nil, docError(&expression.Error{Path: path, Op: name, Err: err}, doc)
			}
			if hasName {
				m, _ := d["metadata"].(map[string]any)
				m = maps.Clone(m)
				m["name"] = docName + "-" + strconv.Itoa(i)
				d["metadata"] = m
			}
			if err := tally.Add(map[string]any(d)); err != nil {
				return nil, docError(&expression.Error{Path: path, Op: name, Err: err}, doc)
			}
			out = append(out, d)
		}
		return out, nil
	}).WithSize(func(doc dbsp.Document) int {
		l, _ := pa.get(doc).([]any)
		return len(l)
	}), nil
}

// groupArgs compiles the [key, value] argument of @gather and @groupBy.
func groupArgs(arg any, path, op string, ev *evaluator) (key expression.Expression, value any, valuePath string, err error) {
	l, ok := arg.([]any)
	if !ok || len(l) != 2 {
		return nil, nil, "", &expression.Error{Path: path, Op: op, Err: fmt.Errorf("argument must be a list [key, value], got %s", describeLen(arg))}
	}
	if key, err = ev.parse(l[0], expression.Index(path, 0)); err != nil {
		return nil, nil, "", err
	}
	return key, l[1], expression.Index(path, 1), nil
}

func describeLen(v any) string {
	if l, ok := v.([]any); ok {
		return fmt.Sprintf("a list of %d", len(l))
	}
	return "a " + typeName(v)
}

// groupKey returns a KeyFunc evaluating key; documents whose key is null
// (or missing) belong to no group and are dropped.
func groupKey(key expression.Expression, ev *evaluator) dbsp.KeyFunc {
	return func(doc dbsp.Document) (any, error) {
		k, err := ev.eval(key, doc)
		if err != nil {
			return nil, docError(err, doc)
		}
		if k == nil {
			return nil, dbsp.ErrSkip
		}
		return k, nil
	}
}

// member is what @gather and @groupBy keep of a group member: its sort key
// (metadata.namespace, a zero byte, metadata.name: the bytes order of the
// key is the order by namespace, then name, as neither holds a zero byte)
// and its value, computed once as it joins the group.
type member struct {
	key   string
	value any
}

// newMember returns the MemberFunc computing the member of a document with
// the given value function.
func newMember(value func(dbsp.Document) (any, error)) dbsp.MemberFunc {
	return func(doc dbsp.Document) (any, error) {
		v, err := value(doc)
		if err != nil {
			return nil, docError(err, doc)
		}
		md, _ := doc["metadata"].(map[string]any)
		ns, _ := md["namespace"].(string)
		name, _ := md["name"].(string)
		return &member{key: ns + "\x00" + name, value: v}, nil
	}
}

// memberKey orders the members of a group of @gather and @groupBy by
// metadata.namespace, then metadata.name; GroupBy breaks ties by the
// canonical order of documents.
func memberKey(v any) string { return v.(*member).key }

// groupValues returns the first member document of a group (nil if there
// is none) and the non-null member values, in the group's order
// (memberKey), each repeated by its (positive) weight. Members of zero or
// negative weight are skipped; with valued, so are members whose value is
// null (the first document is then the first member with a value).
func groupValues(ms []dbsp.Member, valued bool) (dbsp.Document, []any) {
	var first dbsp.Document
	n := 0
	for _, m := range ms {
		if m.Weight > 0 {
			n += m.Weight
		}
	}
	values := make([]any, 0, n)
	for _, m := range ms {
		if m.Weight <= 0 {
			continue
		}
		v := m.Value.(*member).value
		if valued && v == nil {
			continue
		}
		if first == nil {
			first = m.Doc
		}
		if v != nil {
			for range m.Weight {
				values = append(values, v)
			}
		}
	}
	return first, values
}

// compileGather compiles `@gather [key, value]` (alias @mux) to an
// incremental grouped aggregate: documents are grouped by the key
// expression (null keys are dropped); members whose value at the value
// path (a singular JSONPath) is missing or null are skipped, as in
// Δ-controller, and each group with at least one other member yields its
// first such member (see memberKey) with the list of the members' values set
// at that path. A group whose members all lack the value yields nothing.
func compileGather(name string, arg any, path string, ev *evaluator) (dbsp.Operator, error) {
	key, value, valuePath, err := groupArgs(arg, path, name, ev)
	if err != nil {
		return nil, err
	}
	if m, ok := value.(map[string]any); ok && len(m) == 1 {
		for k, v := range m {
			if strings.HasPrefix(k, "$") {
				// {"$.spec.podNames": "$.metadata.name"}, from earlier
				// Δ-controller documentation.
				return nil, &expression.Error{Path: valuePath, Op: name, Err: fmt.Errorf(
					"the value must be a JSONPath string, read from each object and written back with the list at the same path; "+
						"instead of {%q: %s} write %s and move the list to %s with a @project after the @gather", k, quoted(v), quoted(v), k)}
			}
		}
	}
	pa, err := compilePath(value, valuePath, name)
	if err != nil {
		return nil, err
	}
	get := func(doc dbsp.Document) (any, error) { return pa.get(doc), nil }
	return dbsp.NewGroupBy(groupKey(key, ev), newMember(get), func(_ any, ms []dbsp.Member) (dbsp.Document, error) {
		first, values := groupValues(ms, true)
		if first == nil {
			return nil, nil
		}
		out, err := pa.with(first, values)
		if err != nil {
			return nil, docError(&expression.Error{Path: valuePath, Op: name, Err: err}, first)
		}
		return out, nil
	}).OrderBy(memberKey), nil
}

// compileGroupBy compiles `@groupBy [key, value]` and `@groupBy [key,
// value, {"distinct": bool}]` to an incremental grouped aggregate:
// documents are grouped by the key expression (null keys are dropped); each
// group yields {"key": key, "values": [value, ...]} with the non-null values
// of the value expression over the group's members in the order of
// memberKey. With "distinct": true a value equal to an earlier one of the
// group is left out. In the successor's dialect the group also carries
// "documents", its members' documents in the same order (distinct ones
// only with "distinct"), and a null value expression collects the
// documents themselves as values (both as the successor's @groupBy does).
func compileGroupBy(arg any, path string, ev *evaluator) (dbsp.Operator, error) {
	distinct := false
	if l, ok := arg.([]any); ok && len(l) == 3 {
		var err error
		if distinct, err = groupOptions(l[2], expression.Index(path, 2)); err != nil {
			return nil, err
		}
		arg = l[:2]
	}
	key, value, valuePath, err := groupArgs(arg, path, opGroupBy, ev)
	if err != nil {
		if l, ok := arg.([]any); ok && len(l) > 3 {
			return nil, &expression.Error{Path: path, Op: opGroupBy, Err: fmt.Errorf(`argument must be a list [key, value] or [key, value, {"distinct": true}], got %s`, describeLen(arg))}
		}
		return nil, err
	}
	successor := ev.dialect.Successor()
	var get func(doc dbsp.Document) (any, error)
	if value == nil && successor {
		get = func(doc dbsp.Document) (any, error) { return map[string]any(doc), nil }
	} else {
		val, err := ev.parse(value, valuePath)
		if err != nil {
			return nil, err
		}
		get = func(doc dbsp.Document) (any, error) { return ev.eval(val, doc) }
	}
	return dbsp.NewGroupBy(groupKey(key, ev), newMember(get), func(k any, ms []dbsp.Member) (dbsp.Document, error) {
		first, values := groupValues(ms, false)
		if first == nil {
			return nil, nil
		}
		if distinct {
			values = distinctValues(values)
		}
		out := dbsp.Document{"key": k, "values": values}
		if successor {
			docs := groupDocuments(ms)
			if distinct {
				docs = distinctValues(docs)
			}
			out["documents"] = docs
		}
		return out, nil
	}).OrderBy(memberKey), nil
}

// groupOptions reads the options of @groupBy: {"distinct": bool}.
func groupOptions(v any, path string) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return false, &expression.Error{Path: path, Op: opGroupBy, Err: fmt.Errorf(`options must be a map such as {"distinct": true}, got %s`, typeName(v))}
	}
	distinct := false
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "distinct" {
			return false, &expression.Error{Path: expression.Field(path, k), Op: opGroupBy, Err: fmt.Errorf(`unknown option %q; the option is "distinct"`, k)}
		}
		b, ok := m[k].(bool)
		if !ok {
			return false, &expression.Error{Path: expression.Field(path, k), Op: opGroupBy, Err: fmt.Errorf("must be a bool, got %s", typeName(m[k]))}
		}
		distinct = b
	}
	return distinct, nil
}

// groupDocuments returns the documents of the members of positive weight
// of a group, each repeated by its weight, in the group's order.
func groupDocuments(ms []dbsp.Member) []any {
	var docs []any
	for _, m := range ms {
		for range max(m.Weight, 0) {
			docs = append(docs, map[string]any(m.Doc))
		}
	}
	if docs == nil {
		docs = []any{}
	}
	return docs
}

// distinctValues returns vs without the values equal (dbsp.Equal) to an
// earlier one, in order.
func distinctValues(vs []any) []any {
	seen := make(map[uint64][]any, len(vs))
	out := vs[:0:0]
	for _, v := range vs {
		h := dbsp.Hash(v)
		if slices.ContainsFunc(seen[h], func(w any) bool { return dbsp.Equal(v, w) }) {
			continue
		}
		seen[h] = append(seen[h], v)
		out = append(out, v)
	}
	return out
}

// quoted is v for an error message: a string quoted, anything else as %v.
func quoted(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%v", v)
}
