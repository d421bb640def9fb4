package rbac

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// Verbs in the order rules list them.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// SourceVerbs are the verbs of a Watcher or Periodic source.
var SourceVerbs = []string{"get", "list", "watch"}

// TargetVerbs are the verbs of each target type on the target resource.
var TargetVerbs = map[opv1a1.TargetType][]string{
	opv1a1.Updater: {"get", "list", "watch", "create", "update", "delete"},
	opv1a1.Patcher: {"get", "list", "watch", "patch"},
	// Server-side apply creates a missing object with a PATCH, which the
	// API server authorizes as create as well as patch.
	opv1a1.Applier: {"get", "list", "watch", "create", "patch"},
}

// StatusVerbs are the verbs of each target type on the target's status
// subresource, granted when the pipeline output sets a status.
var StatusVerbs = map[opv1a1.TargetType][]string{
	opv1a1.Updater: {"update"},
	opv1a1.Patcher: {"patch"},
	opv1a1.Applier: {"patch"},
}

// Options configure Compute.
type Options struct {
	// Mapper resolves kinds to resources and tells cluster-scoped kinds
	// from namespaced ones. When nil, resources are guessed with the
	// lowercase-plural convention and every kind is taken as namespaced.
	Mapper meta.RESTMapper
	// Discovery, when set, lists the resources of each group version (as
	// the API server's discovery does, "<resource>/status" for a kind
	// with the status subresource): a target whose kind has no status
	// subresource gets no <resource>/status rule. When nil, or when the
	// group version cannot be listed, the rule is granted whenever the
	// pipeline output sets status (WritesStatus).
	Discovery interface {
		ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
	}
}

// Need is what one source or target of one controller needs.
type Need struct {
	// Operator and Controller name the controller; for a Metacontroller-style
	// controller, Operator is its name and Controller its kind.
	Operator, Controller string
	// Path is the spec path of the source or target, e.g.
	// spec.controllers[0].sources[1] or spec.controllers[0].target.
	Path string
	// Kind is the kind as written in the spec.
	Kind schema.GroupVersionKind
	// Group and Resource name the API resource, e.g. "" and "pods", or
	// "apps" and "deployments/status".
	Group, Resource string
	// Namespace is the namespace of a Role; empty for the ClusterRole.
	Namespace string
	// ResourceName restricts the rule to one object (Secrets and ConfigMaps
	// of webhook connection settings); empty for all.
	ResourceName string
	// Verbs in canonical order.
	Verbs []string
	// Why says which rule of the runtime asks for the verbs, e.g.
	// "Watcher source" or "Patcher target".
	Why string
}

// Rules are the permissions a set of operators needs.
type Rules struct {
	// Cluster are the rules of the ClusterRole, sorted by group and resource.
	Cluster []rbacv1.PolicyRule
	// Namespaced are the rules of the Role of each namespace, without what
	// Cluster already grants.
	Namespaced map[string][]rbacv1.PolicyRule
	// Needs lists each source and target that needs something, in spec order.
	Needs []Need
	// Warnings are kinds the Mapper did not know (their resource was
	// guessed), one message each.
	Warnings []string
}

// Namespaces returns the namespaces that have a Role, sorted.
func (r *Rules) Namespaces() []string {
	out := make([]string, 0, len(r.Namespaced))
	for ns := range r.Namespaced {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

type resKey struct{ ns, group, resource, name string }

// Input are the controllers to compute rules for.
type Input struct {
	Operators  []*opv1a1.Operator
	Composites []*mcv1a1.CompositeController
	Decorators []*mcv1a1.DecoratorController
}

// Compute returns the RBAC rules the manager needs to run ops. Errors name
// the operator and the spec path, e.g.
// `operator "x": spec.controllers[0].target.kind: must not be empty`.
func Compute(ops []*opv1a1.Operator, opts Options) (*Rules, error) {
	return ComputeInput(Input{Operators: ops}, opts)
}

// computation accumulates the needs of the controllers.
type computation struct {
	opts   Options
	out    *Rules
	grants map[resKey]map[string]bool
	warned map[string]bool
}

func (c *computation) add(n Need) {
	k := resKey{n.Namespace, n.Group, n.Resource, n.ResourceName}
	if c.grants[k] == nil {
		c.grants[k] = map[string]bool{}
	}
	for _, v := range n.Verbs {
		c.grants[k][v] = true
	}
	c.out.Needs = append(c.out.Needs, n)
}

func (c *computation) warn(msg string) {
	if !c.warned[msg] {
		c.warned[msg] = true
		c.out.Warnings = append(c.out.Warnings, msg)
	}
}

// ComputeInput returns the RBAC rules the manager needs to run the
// operators and the Metacontroller-style controllers of in. Errors name the
// object and the spec path.
func ComputeInput(in Input, opts Options) (*Rules, error) {
	c := &computation{opts: opts, out: &Rules{Namespaced: map[string][]rbacv1.PolicyRule{}},
		grants: map[resKey]map[string]bool{}, warned: map[string]bool{}}
	for _, op := range in.Operators {
		if err := c.operator(op); err != nil {
			return nil, err
		}
	}
	for _, cc := range in.Composites {
		if err := c.composite(cc); err != nil {
			return nil, err
		}
	}
	for _, dc := range in.Decorators {
		if err := c.decorator(dc); err != nil {
			return nil, err
		}
	}
	c.rules()
	return c.out, nil
}

func (c *computation) operator(op *opv1a1.Operator) error {
	for i, ctl := range op.Spec.Controllers {
		path := fmt.Sprintf("spec.controllers[%d]", i)
		for j, s := range ctl.Sources {
			spath := fmt.Sprintf("%s.sources[%d]", path, j)
			if s.Type == opv1a1.OneShot || s.Type == opv1a1.Periodic || s.APIGroup == nil || opv1a1.IsViewGroup(*s.APIGroup) {
				continue
			}
			if s.Kind == "" {
				return fmt.Errorf("operator %q: %s.kind: must not be empty", op.Name, spath)
			}
			// The manager watches each kind with one cluster-wide informer
			// shared by every controller, so even a source restricted to a
			// namespace needs get/list/watch cluster-wide.
			gvk, res, _ := c.resolve(s.Resource)
			ns := ""
			typ := s.Type
			if typ == "" {
				typ = opv1a1.Watcher
			}
			c.add(Need{Operator: op.Name, Controller: ctl.Name, Path: spath, Kind: gvk,
				Group: res.Group, Resource: res.Resource, Namespace: ns,
				Verbs: SourceVerbs, Why: string(typ) + " source"})
		}
		for j, t := range ctl.AllTargets() {
			tpath := path + "." + ctl.TargetField(j)
			if t.APIGroup == nil || opv1a1.IsViewGroup(*t.APIGroup) {
				continue
			}
			if t.Kind == "" {
				return fmt.Errorf("operator %q: %s.kind: must not be empty", op.Name, tpath)
			}
			typ := t.Type
			if typ == "" {
				typ = opv1a1.Updater
			}
			verbs, ok := TargetVerbs[typ]
			if !ok {
				return fmt.Errorf("operator %q: %s.type: unknown target type %q (want Updater, Patcher or Applier)", op.Name, tpath, t.Type)
			}
			if t.Adoption == opv1a1.Adopt {
				// A target that only adopts never creates.
				verbs = slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return v == "create" })
			}
			gvk, res, _ := c.resolve(t.Resource)
			c.add(Need{Operator: op.Name, Controller: ctl.Name, Path: tpath, Kind: gvk,
				Group: res.Group, Resource: res.Resource, Verbs: verbs, Why: string(typ) + " target"})
			status, err := WritesStatusTo(ctl.Pipeline.Raw, t.OutputName())
			if err != nil {
				return fmt.Errorf("operator %q: %s.pipeline: %w", op.Name, path, err)
			}
			if status && c.hasStatusSubresource(res) {
				c.add(Need{Operator: op.Name, Controller: ctl.Name, Path: tpath, Kind: gvk,
					Group: res.Group, Resource: res.Resource + "/status", Verbs: StatusVerbs[typ],
					Why: string(typ) + " target whose pipeline output sets status"})
			}
		}
	}
	return nil
}

// hasStatusSubresource reports whether res has the status subresource, as
// Options.Discovery lists it; true when that cannot be told.
func (c *computation) hasStatusSubresource(res schema.GroupVersionResource) bool {
	if c.opts.Discovery == nil {
		return true
	}
	list, err := c.opts.Discovery.ServerResourcesForGroupVersion(res.GroupVersion().String())
	if err != nil || list == nil {
		return true
	}
	for _, r := range list.APIResources {
		if r.Name == res.Resource+"/status" {
			return true
		}
	}
	return false
}

// rules turns the grants into the ClusterRole and Role rules.
func (c *computation) rules() {
	keys := make([]resKey, 0, len(c.grants))
	for k := range c.grants {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.ns != b.ns {
			return a.ns < b.ns
		}
		if a.group != b.group {
			return a.group < b.group
		}
		if a.resource != b.resource {
			return a.resource < b.resource
		}
		return a.name < b.name
	})
	for _, k := range keys {
		verbs := c.grants[k]
		// Leave out what a wider rule grants anyway: the ClusterRole's for
		// a Role, the rule without a name for a rule with one.
		for _, wider := range []resKey{{"", k.group, k.resource, ""}, {k.ns, k.group, k.resource, ""}} {
			if wider == k {
				continue
			}
			for v := range c.grants[wider] {
				delete(verbs, v)
			}
		}
		if len(verbs) == 0 {
			continue
		}
		rule := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: sortVerbs(verbs)}
		if k.name != "" {
			rule.ResourceNames = []string{k.name}
		}
		if k.ns == "" {
			c.out.Cluster = append(c.out.Cluster, rule)
		} else {
			c.out.Namespaced[k.ns] = append(c.out.Namespaced[k.ns], rule)
		}
	}
}

// resolve returns the kind and resource of r and whether it is namespaced.
func (c *computation) resolve(r opv1a1.Resource) (schema.GroupVersionKind, schema.GroupVersionResource, bool) {
	gvk := schema.GroupVersionKind{Group: *r.APIGroup, Kind: r.Kind}
	if r.Version != nil {
		gvk.Version = *r.Version
	}
	if c.opts.Mapper != nil {
		var versions []string
		if gvk.Version != "" {
			versions = []string{gvk.Version}
		}
		m, err := c.opts.Mapper.RESTMapping(gvk.GroupKind(), versions...)
		if err == nil {
			return gvk, m.Resource, m.Scope.Name() != meta.RESTScopeNameRoot
		}
		c.warn(fmt.Sprintf("kind %s: not served by the cluster (%v); resource name guessed", displayGK(gvk.GroupKind()), err))
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvk, plural, true
}

func displayGK(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Kind + "." + gk.Group
}

func sortVerbs(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for _, v := range verbOrder {
		if set[v] {
			out = append(out, v)
		}
	}
	var rest []string
	for v := range set {
		if !slices.Contains(verbOrder, v) {
			rest = append(rest, v)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// WritesStatus reports whether the output of a pipeline (its raw JSON spec)
// sets a top-level status: the last @project stage has a "status" key or a
// "$.status..." setter (in its map, or in any step of its list form, whose
// steps all merge into the output), or a "$." setter copying a whole
// document, or, when no @project reshapes the document, the output is the
// source object itself. A @groupBy or @join with nothing reshaping after it
// yields no status. A pipeline in branch form is read as WritesStatusTo does
// for every output.
func WritesStatus(raw []byte) (bool, error) {
	return WritesStatusTo(raw, "")
}

// WritesStatusTo is WritesStatus for the output named output (a target's
// name: its name: or its kind) of a pipeline in branch form
// (docs/reference/pipeline.md#branches): the status of the branches whose
// {"@output": output} ends them, each read as a plain pipeline, where a
// branch that does not reshape its documents passes on the status of its
// @inputs (a source object's own, a stream's from the branches that write
// it). An empty output stands for every output. For a plain pipeline the
// name does not matter.
func WritesStatusTo(raw []byte, output string) (bool, error) {
	if len(raw) == 0 {
		return true, nil
	}
	var spec any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return false, err
	}
	var stages []any
	switch s := spec.(type) {
	case []any:
		stages = s
	case map[string]any:
		stages = []any{s}
	case nil:
	default:
		return false, fmt.Errorf("a pipeline must be a stage or a list of stages, got %T", spec)
	}
	branches := [][]any{}
	for _, st := range stages {
		if b, ok := st.([]any); ok {
			branches = append(branches, b)
		}
	}
	if len(branches) == 0 {
		decided, status := stagesStatus(stages)
		return !decided || status, nil
	}
	return branchesStatus(branches, output, map[string]bool{}), nil
}

// branchesStatus reports whether some branch writing output (every branch
// when output is "") yields a status; seen guards against cycles (which the
// compiler refuses).
func branchesStatus(branches [][]any, output string, seen map[string]bool) bool {
	if seen[output] {
		return false
	}
	seen[output] = true
	for _, b := range branches {
		inputs, out := branchEnds(b)
		if output != "" && out != output {
			continue
		}
		decided, status := stagesStatus(b)
		if decided {
			if status {
				return true
			}
			continue
		}
		for _, in := range inputs {
			stream := false
			for _, o := range branches {
				if _, w := branchEnds(o); w == in {
					stream = true
				}
			}
			if !stream || branchesStatus(branches, in, seen) {
				return true // a source object's own status, or a stream's
			}
		}
	}
	return false
}

// branchEnds returns the names of a branch's {"@inputs": [...]} and its
// {"@output": name}.
func branchEnds(b []any) (inputs []string, output string) {
	for _, st := range b {
		m, _ := st.(map[string]any)
		if l, ok := m["@inputs"].([]any); ok {
			for _, v := range l {
				if n, ok := v.(string); ok {
					inputs = append(inputs, n)
				}
			}
		}
		if n, ok := m["@output"].(string); ok {
			output = n
		}
	}
	return inputs, output
}

// stagesStatus reads a list of stages from its end: decided is whether a
// stage reshapes the documents (@project, @groupBy, @join), status whether
// the last one of them yields a status.
func stagesStatus(stages []any) (decided, status bool) {
	for i := len(stages) - 1; i >= 0; i-- {
		m, ok := stages[i].(map[string]any)
		if !ok || len(m) != 1 {
			continue
		}
		for name, arg := range m {
			switch name {
			case "@project":
				steps := []any{arg}
				if l, ok := arg.([]any); ok {
					steps = l
				}
				for _, step := range steps {
					sm, _ := step.(map[string]any)
					for k := range sm {
						if k == "status" || k == "$." || k == "$.status" || strings.HasPrefix(k, "$.status.") || strings.HasPrefix(k, "$.status[") || strings.HasPrefix(k, "$['status']") {
							return true, true
						}
					}
				}
				return true, false
			case "@groupBy", "@join":
				return true, false
			}
		}
	}
	return false, false
}

// ManagerRules are the ClusterRole rules the manager (dctl start) needs for
// itself, whatever operators it runs: watch Operator, CompositeController and
// DecoratorController objects and write their status, keep the
// ControllerRevisions of rolling child updates, and record Events; watch
// ResourceGraphDefinitions, write their status and finalizers, and manage the
// instance CRDs they declare (apply, read, delete). The children of
// Metacontroller-style controllers and the resources and instances of RGDs
// are not included: they need rbac.mode=full or rules of their own (dctl
// rbac of the RGD).
func ManagerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"dcontroller.io"}, Resources: []string{"operators"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"dcontroller.io"}, Resources: []string{"operators/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
		{APIGroups: []string{"kro.run"}, Resources: []string{"resourcegraphdefinitions"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{"kro.run"}, Resources: []string{"resourcegraphdefinitions/finalizers", "resourcegraphdefinitions/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers", "decoratorcontrollers"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers/status", "decoratorcontrollers/status"}, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	}
}

// LeaderElectionRules are the Role rules, in the leader-election namespace,
// of a manager run with --leader-elect: the Lease dcontroller-manager and the
// Events that report its changes of hands.
func LeaderElectionRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	}
}

// FullRules grant everything on every resource: the rbac.mode=full of the
// Helm chart, for operators that are not known at install time.
func FullRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
	}
}
