package rgd

import (
	"container/heap"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
)

// MaxForEachDimensions is the number of iterators one forEach may have
// (kro's default --rgd-max-collection-dimension-size).
const MaxForEachDimensions = 10

// resourceIDPattern is kro's rule for resource ids and iterator names:
// lowerCamelCase.
var resourceIDPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// reservedNames are the words kro refuses as resource ids and iterator
// names (its own keywords and CEL's reserved symbols).
var reservedNames = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`apiVersion context dependency dependencies each externalRef
		externalReference externalRefs externalReferences graph instance item items kind kro
		metadata namespace object resource resourcegraphdefinition resourceGraphDefinition
		resources root runtime schema self serviceAccountName spec status this variables vars
		version true false null in as break const continue else for function if import let loop
		package namespace return var void while`) {
		reservedNames[w] = true
	}
}

// GraphInput is what BuildGraph reads from a ResourceGraphDefinition: its
// resources in declaration order and its decoded spec.schema.status.
type GraphInput struct {
	Resources []ResourceInput
	// Status is spec.schema.status, decoded (nil: none).
	Status map[string]any
}

// ResourceInput is one entry of spec.resources, decoded.
type ResourceInput struct {
	ID string
	// Template is the decoded template (nil for an external reference).
	Template map[string]any
	// ExternalRef is the decoded externalRef (apiVersion, kind, metadata
	// with name or selector, and namespace); nil for a template.
	ExternalRef map[string]any
	ReadyWhen   []string
	IncludeWhen []string
	// ForEach holds one single-entry map {iterator: "${expr}"} per
	// dimension.
	ForEach []map[string]string
}

// ExprKind says what an expression's value depends on, as kro classifies
// template variables.
type ExprKind string

const (
	// Static expressions read only the instance (schema) and constants:
	// spec-time values, known as soon as the instance is.
	Static ExprKind = "static"
	// Dynamic expressions read the observed state of other resources: they
	// can be evaluated once those exist (and are ready), and change with them.
	Dynamic ExprKind = "dynamic"
	// Iteration expressions read a forEach iterator: evaluated once per item.
	Iteration ExprKind = "iteration"
)

// CompiledField is a template (or externalRef, or status) value holding
// expressions, compiled.
type CompiledField struct {
	TemplateField
	// Rel is the field's path inside its template (metadata.name), the
	// place the value is written to.
	Rel  string
	Expr *Expression
	Kind ExprKind
}

// Condition is one compiled includeWhen or readyWhen entry.
type Condition struct {
	Path string
	Expr *Expression
}

// Iterator is one compiled forEach dimension.
type Iterator struct {
	Name string
	Path string
	Expr *Expression
}

// Node is one resource of the graph.
type Node struct {
	ID string
	// Index is the resource's place in spec.resources.
	Index int
	// Path is spec.resources[Index].
	Path string
	// External is true for an externalRef, which is read, never written.
	External bool
	// Collection is true when the resource stands for a list of objects (a
	// forEach, or an externalRef with a selector).
	Collection bool
	// Fields are the compiled expressions of the template (or externalRef).
	Fields      []*CompiledField
	ForEach     []*Iterator
	IncludeWhen []*Condition
	ReadyWhen   []*Condition
	// DependsOn are the resources whose observed state this one reads (in
	// its template, forEach or includeWhen), in declaration order: it is
	// created once they exist and are ready.
	DependsOn []string
}

// Graph is the compiled dependency graph of an RGD's resources.
type Graph struct {
	// Nodes are the resources in declaration order.
	Nodes []*Node
	// Order is a topological order of the resource ids: every resource after
	// those it depends on, ties broken by declaration order (kro's order,
	// reported as status.topologicalOrder). Deletion goes in reverse.
	Order []string
	// Status are the compiled spec.schema.status fields.
	Status []*CompiledField
	// Env is the environment the expressions were compiled in.
	Env *Env
}

// Node returns the node with the id, or nil.
func (g *Graph) Node(id string) *Node {
	for _, n := range g.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// BuildGraph validates and compiles the resources and status of an RGD and
// orders the resources. Errors are *Error with the path into the RGD
// (spec.resources[i]..., spec.schema.status...): a bad or duplicate id, a
// template and an externalRef both or neither, a bad forEach, a CEL error, an
// unknown identifier, a reference a place does not allow (readyWhen names
// only its own resource, or each in a collection; forEach, includeWhen and
// templates name schema and other resources, templates also their own
// iterators), a cycle (spec.resources: resources form a cycle: a -> b -> a).
// The rules are kro's (website/docs/docs/concepts/rgd/).
func BuildGraph(in GraphInput) (*Graph, error) {
	nodes := make([]*Node, len(in.Resources))
	index := map[string]int{}
	var decl Declarations
	decl.Each = true
	iterSeen := map[string]bool{}
	for i, r := range in.Resources {
		path := Index("spec.resources", i)
		if err := checkName(Field(path, "id"), r.ID, "id"); err != nil {
			return nil, err
		}
		if _, dup := index[r.ID]; dup {
			return nil, errorf(Field(path, "id"), "duplicate resource id %q", r.ID)
		}
		index[r.ID] = i
		n := &Node{ID: r.ID, Index: i, Path: path, External: r.ExternalRef != nil}
		switch {
		case r.Template != nil && r.ExternalRef != nil:
			return nil, errorf(path, "template and externalRef are exclusive")
		case r.Template == nil && r.ExternalRef == nil:
			return nil, errorf(path, "one of template or externalRef is required")
		case r.ExternalRef != nil && len(r.ForEach) > 0:
			return nil, errorf(path, "forEach and externalRef are exclusive")
		}
		if r.ExternalRef != nil {
			if md, ok := r.ExternalRef["metadata"].(map[string]any); ok && md["selector"] != nil {
				n.Collection = true
			}
		}
		if len(r.ForEach) > 0 {
			n.Collection = true
		}
		nodes[i] = n
	}
	for i, r := range in.Resources {
		if len(r.ForEach) > MaxForEachDimensions {
			return nil, errorf(Field(nodes[i].Path, "forEach"), "%d dimensions, more than %d", len(r.ForEach), MaxForEachDimensions)
		}
		names := map[string]bool{}
		for j, dim := range r.ForEach {
			p := Index(Field(nodes[i].Path, "forEach"), j)
			if len(dim) != 1 {
				return nil, errorf(p, "must map exactly one iterator name to an expression, got %d entries", len(dim))
			}
			for name := range dim {
				if err := checkName(p, name, "iterator name"); err != nil {
					return nil, err
				}
				if _, clash := index[name]; clash {
					return nil, errorf(p, "iterator name %q is also a resource id", name)
				}
				if names[name] {
					return nil, errorf(p, "duplicate iterator name %q", name)
				}
				names[name] = true
				if !iterSeen[name] {
					iterSeen[name] = true
					decl.Iterators = append(decl.Iterators, name)
				}
			}
		}
		if nodes[i].Collection {
			decl.Collections = append(decl.Collections, r.ID)
		} else {
			decl.Resources = append(decl.Resources, r.ID)
		}
	}
	env, err := NewEnv(decl)
	if err != nil {
		return nil, errorf("spec.resources", "%v", err)
	}
	g := &Graph{Nodes: nodes, Env: env}
	for i, r := range in.Resources {
		if err := g.compileNode(nodes[i], r, index); err != nil {
			return nil, err
		}
	}
	if err := g.compileStatus(in.Status, index); err != nil {
		return nil, err
	}
	order, cycle := topoOrder(nodes, index)
	if cycle != nil {
		return nil, errorf("spec.resources", "resources form a cycle: %s", strings.Join(cycle, " -> "))
	}
	g.Order = order
	return g, nil
}

// checkName applies kro's rules for resource ids and iterator names.
func checkName(path, name, what string) error {
	switch {
	case name == "":
		return errorf(path, "%s is required", what)
	case reservedNames[name]:
		return errorf(path, "%s %q is a reserved word", what, name)
	case !resourceIDPattern.MatchString(name):
		return errorf(path, "%s %q must be lowerCamelCase (letters and digits, starting with a lower-case letter)", what, name)
	}
	return nil
}

// scope says which variables an expression at some place may name.
type scope struct {
	self      string          // the node's id (refused: a resource does not read itself)
	resources bool            // other resources allowed
	iterators map[string]bool // iterators allowed
	only      string          // if set, the only name allowed (readyWhen)
	noOmit    bool
}

// compile compiles src at path and checks its references against sc,
// returning the resource ids it reads.
func (g *Graph) compile(path, src string, sc scope, index map[string]int) (*Expression, []string, error) {
	x, err := g.Env.Compile(src)
	if err != nil {
		return nil, nil, &Error{Path: path, Err: err}
	}
	var deps []string
	for _, name := range x.Names() {
		_, isResource := index[name]
		switch {
		case sc.only != "":
			if name != sc.only {
				return nil, nil, errorf(path, "may only reference %s, not %s", sc.only, name)
			}
		case name == SchemaVar:
		case name == EachVar:
			return nil, nil, errorf(path, "each is only available in readyWhen of a collection")
		case isResource && name == sc.self:
			return nil, nil, errorf(path, "a resource cannot reference itself (%s) here; readyWhen is where it reads its own state", name)
		case isResource && sc.resources:
			deps = append(deps, name)
		case sc.iterators[name]:
		default:
			if g.Env.known[name] {
				return nil, nil, errorf(path, "iterator %s is not in scope here (an iterator is read in its own resource's template; forEach iterators do not read each other)", name)
			}
			return nil, nil, errorf(path, "unknown identifier %s", name)
		}
	}
	for _, r := range x.References {
		if r.Name == SchemaVar && (r.Path == "status" || strings.HasPrefix(r.Path, "status.") || strings.HasPrefix(r.Path, "status[")) {
			return nil, nil, errorf(path, "schema.status is not readable: schema is the instance without its status")
		}
	}
	if sc.noOmit && x.Calls(omitFunction) {
		return nil, nil, errorf(path, "omit() can only be used in resource template fields")
	}
	return x, deps, nil
}

// checkBool refuses a condition whose type is known not to be a bool.
func checkBool(path string, x *Expression) error {
	t := x.OutputType
	if t == nil || t.IsExactType(cel.BoolType) || t.IsExactType(cel.DynType) || t.IsExactType(cel.OptionalType(cel.BoolType)) {
		return nil
	}
	return errorf(path, "must return a bool, got %s", t)
}

func (g *Graph) compileNode(n *Node, r ResourceInput, index map[string]int) error {
	iters := map[string]bool{}
	for _, dim := range r.ForEach {
		for name := range dim {
			iters[name] = true
		}
	}
	deps := map[string]bool{}
	addDeps := func(ds []string) {
		for _, d := range ds {
			deps[d] = true
		}
	}
	// forEach
	for j, dim := range r.ForEach {
		for name, src := range dim {
			p := Field(Index(Field(n.Path, "forEach"), j), name)
			body, err := ParseStandalone(p, src)
			if err != nil {
				return err
			}
			x, ds, err := g.compile(p, body, scope{self: n.ID, resources: true, noOmit: true}, index)
			if err != nil {
				return err
			}
			addDeps(ds)
			n.ForEach = append(n.ForEach, &Iterator{Name: name, Path: p, Expr: x})
		}
	}
	// template or externalRef
	root, obj := Field(n.Path, "template"), r.Template
	if r.ExternalRef != nil {
		root, obj = Field(n.Path, "externalRef"), r.ExternalRef
	}
	if err := checkObjectShape(root, obj); err != nil {
		return err
	}
	fields, err := FindFields(obj, "")
	if err != nil {
		if e, ok := err.(*Error); ok {
			return &Error{Path: joinRel(root, e.Path), Err: e.Err}
		}
		return &Error{Path: root, Err: err}
	}
	identityIters := map[string]bool{}
	for _, f := range fields {
		cf := &CompiledField{TemplateField: f, Rel: f.Path}
		cf.Path = joinRel(root, f.Path)
		identity := f.Path == "metadata.name" || f.Path == "metadata.namespace"
		x, ds, err := g.compile(cf.Path, f.CEL(), scope{self: n.ID, resources: true, iterators: iters, noOmit: identity}, index)
		if err != nil {
			return err
		}
		if identity && x.Calls(omitFunction) {
			return errorf(cf.Path, "omit() cannot be used on metadata.name or metadata.namespace")
		}
		addDeps(ds)
		cf.Expr, cf.Kind = x, Static
		if len(ds) > 0 {
			cf.Kind = Dynamic
		}
		for _, name := range x.Names() {
			if iters[name] {
				cf.Kind = Iteration
				if identity {
					identityIters[name] = true
				}
			}
		}
		n.Fields = append(n.Fields, cf)
	}
	var missing []string
	for _, dim := range r.ForEach {
		for name := range dim {
			if !identityIters[name] {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) > 0 {
		return errorf(Field(n.Path, "forEach"), "every iterator must be used in metadata.name or metadata.namespace so that each item is its own object; not used: %s", strings.Join(missing, ", "))
	}
	// includeWhen
	for j, src := range r.IncludeWhen {
		p := Index(Field(n.Path, "includeWhen"), j)
		body, err := ParseStandalone(p, src)
		if err != nil {
			return err
		}
		x, ds, err := g.compile(p, body, scope{self: n.ID, resources: true, noOmit: true}, index)
		if err != nil {
			return err
		}
		if err := checkBool(p, x); err != nil {
			return err
		}
		addDeps(ds)
		n.IncludeWhen = append(n.IncludeWhen, &Condition{Path: p, Expr: x})
	}
	// readyWhen
	only := n.ID
	if n.Collection {
		only = EachVar
	}
	for j, src := range r.ReadyWhen {
		p := Index(Field(n.Path, "readyWhen"), j)
		body, err := ParseStandalone(p, src)
		if err != nil {
			return err
		}
		x, _, err := g.compile(p, body, scope{only: only, noOmit: true}, index)
		if err != nil {
			return err
		}
		if err := checkBool(p, x); err != nil {
			return err
		}
		n.ReadyWhen = append(n.ReadyWhen, &Condition{Path: p, Expr: x})
	}
	for d := range deps {
		n.DependsOn = append(n.DependsOn, d)
	}
	sort.Slice(n.DependsOn, func(a, b int) bool { return index[n.DependsOn[a]] < index[n.DependsOn[b]] })
	return nil
}

// checkObjectShape checks what every template and externalRef needs: a
// string apiVersion and kind, and a metadata map.
func checkObjectShape(root string, obj map[string]any) error {
	for _, k := range []string{"apiVersion", "kind"} {
		if s, ok := obj[k].(string); !ok || s == "" {
			return errorf(Field(root, k), "a non-empty string is required")
		}
	}
	if _, ok := obj["metadata"].(map[string]any); !ok {
		return errorf(Field(root, "metadata"), "an object is required")
	}
	return nil
}

// joinRel appends a path relative to a root ("metadata.name",
// `["a.b"]`, "[0]") to root.
func joinRel(root, rel string) string {
	switch {
	case rel == "":
		return root
	case strings.HasPrefix(rel, "["):
		return root + rel
	}
	return root + "." + rel
}

// compileStatus compiles spec.schema.status: every leaf must be an
// expression naming schema or a resource (kro's rules); status.conditions
// (kro's custom conditions) is refused.
func (g *Graph) compileStatus(status map[string]any, index map[string]int) error {
	const root = "spec.schema.status"
	if status == nil {
		return nil
	}
	if _, ok := status["conditions"]; ok {
		return errorf(Field(root, "conditions"), "custom status conditions are not supported")
	}
	if err := checkStatusLeaves(status, root, 0); err != nil {
		return err
	}
	fields, err := FindFields(status, "")
	if err != nil {
		if e, ok := err.(*Error); ok {
			return &Error{Path: joinRel(root, e.Path), Err: e.Err}
		}
		return err
	}
	for _, f := range fields {
		cf := &CompiledField{TemplateField: f, Rel: f.Path}
		cf.Path = joinRel(root, f.Path)
		x, ds, err := g.compile(cf.Path, f.CEL(), scope{resources: true, noOmit: true}, index)
		if err != nil {
			return err
		}
		if len(x.References) == 0 {
			return errorf(cf.Path, "a status field must reference schema or a resource")
		}
		cf.Expr, cf.Kind = x, Static
		if len(ds) > 0 {
			cf.Kind = Dynamic
		}
		g.Status = append(g.Status, cf)
	}
	return nil
}

// checkStatusLeaves refuses a status leaf that is not a string with an
// expression (kro: "status fields without expressions are not supported").
func checkStatusLeaves(v any, path string, depth int) error {
	if depth > maxTemplateDepth {
		return errorf(path, "nested more than %d levels deep", maxTemplateDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := checkStatusLeaves(x[k], Field(path, k), depth+1); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for i, e := range x {
			if err := checkStatusLeaves(e, Index(path, i), depth+1); err != nil {
				return err
			}
		}
		return nil
	case string:
		if f, err := ParseField(path, x); err != nil || f != nil {
			return err
		}
	}
	return errorf(path, "a status field must be an expression (${...}), got %v", v)
}

// readyHeap orders ready nodes by declaration index.
type readyHeap []int

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *readyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topoOrder is Kahn's algorithm taking, among the nodes whose dependencies
// are placed, the one declared first. On a cycle it returns the cycle
// (first node repeated at the end), found from the first declared node on
// one.
func topoOrder(nodes []*Node, index map[string]int) ([]string, []string) {
	remaining := make([]int, len(nodes))
	dependents := make([][]int, len(nodes))
	for i, n := range nodes {
		remaining[i] = len(n.DependsOn)
		for _, d := range n.DependsOn {
			dependents[index[d]] = append(dependents[index[d]], i)
		}
	}
	h := &readyHeap{}
	for i := range nodes {
		if remaining[i] == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	var order []string
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, nodes[i].ID)
		for _, d := range dependents[i] {
			if remaining[d]--; remaining[d] == 0 {
				heap.Push(h, d)
			}
		}
	}
	if len(order) == len(nodes) {
		return order, nil
	}
	return nil, findCycle(nodes, index)
}

// findCycle returns a cycle of the depends-on relation, by depth-first
// search in declaration order.
func findCycle(nodes []*Node, index map[string]int) []string {
	const (
		unseen = iota
		onStack
		done
	)
	state := make([]int, len(nodes))
	var stack []int
	var cycle []string
	var dfs func(i int) bool
	dfs = func(i int) bool {
		state[i] = onStack
		stack = append(stack, i)
		for _, d := range nodes[i].DependsOn {
			j := index[d]
			switch state[j] {
			case onStack:
				at := slices.Index(stack, j)
				for _, k := range stack[at:] {
					cycle = append(cycle, nodes[k].ID)
				}
				cycle = append(cycle, nodes[j].ID)
				return true
			case unseen:
				if dfs(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return false
	}
	for i := range nodes {
		if state[i] == unseen && dfs(i) {
			return cycle
		}
	}
	return []string{fmt.Sprintf("%v", "unknown")}
}

// MaxCollectionSize is the number of items one collection may have (kro's
// default --rgd-max-collection-size): an instance whose forEach makes more
// gets none of them, state ERROR and a ResourcesReady message saying so.
const MaxCollectionSize = 1000
