package rgd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// The labels kro puts on the resources it manages (kro's pkg/metadata),
// which the compiled controller sets and selects by.
const (
	LabelOwned           = "kro.run/owned"
	LabelKroVersion      = "kro.run/kro-version"
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	LabelInstanceID      = "kro.run/instance-id"
	LabelInstanceName    = "kro.run/instance-name"
	LabelInstanceNS      = "kro.run/instance-namespace"
	LabelInstanceGroup   = "kro.run/instance-group"
	LabelInstanceVersion = "kro.run/instance-version"
	LabelInstanceKind    = "kro.run/instance-kind"
	LabelRGDID           = "kro.run/resource-graph-definition-id"
	LabelRGDName         = "kro.run/resource-graph-definition-name"
	LabelNodeID          = "kro.run/node-id"
	LabelCollectionIndex = "kro.run/collection-index"
	LabelCollectionSize  = "kro.run/collection-size"
)

// ManagedByValue is the app.kubernetes.io/managed-by value kro sets.
const ManagedByValue = "kro"

// KroVersion is the kro.run/kro-version label value the compiled
// controllers set: the kro release whose behaviour they follow.
const KroVersion = "v0.9.0"

// ControllerName is the name of the one controller of a compiled Operator.
const ControllerName = "graph"

// OperatorPrefix prefixes the RGD's name to name its Operator.
const OperatorPrefix = "rgd-"

// OperatorName is the name of the Operator an RGD compiles to:
// "rgd-<RGD name>".
func OperatorName(rgdName string) string { return OperatorPrefix + rgdName }

// Compiled is what an RGD compiles to: the CRD of its instance kind and one
// Operator whose controller creates each instance's resources and writes
// its status. The runtime runs the Operator as any other.
type Compiled struct {
	CRD      *apiextensionsv1.CustomResourceDefinition
	Operator *opv1a1.Operator
}

// clusterScopedKinds are the built-in kinds that are cluster-scoped, by
// group/kind: a template of one of these gets no namespace from its
// instance, and an externalRef of one is matched by name only. The compile
// step has no discovery; any other kind is taken to be namespaced.
var clusterScopedKinds = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"apiextensions.k8s.io/CustomResourceDefinition": true, "storage.k8s.io/StorageClass": true,
	"storage.k8s.io/CSIDriver": true, "scheduling.k8s.io/PriorityClass": true,
	"networking.k8s.io/IngressClass": true, "node.k8s.io/RuntimeClass": true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration": true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":   true,
	"apiregistration.k8s.io/APIService":                           true,
	"kro.run/ResourceGraphDefinition":                             true,
}

// Compile compiles an RGD into the instance CRD (CRD) and one Operator named
// OperatorName(rgd.Name) with one controller, ControllerName, in branch
// form (see docs/kro.md, "How an RGD runs"):
//
//   - sources: the instance kind, and each kind the resources name (the
//     objects of a template's kind selected by kro.run/resource-graph-
//     definition-name; an externalRef's kind unselected);
//   - per resource, a branch joining the instance with the observed
//     objects of the resources it depends on (hash-joined on kro's
//     instance labels), keeping what readyWhen and includeWhen allow,
//     unwinding forEach, and projecting the template with kro's labels and
//     an owner reference to the instance, into an Updater target named by
//     the resource id;
//   - one branch left-joining the instance with every resource, projecting
//     spec.schema.status, kro's state and conditions into a Patcher of the
//     instance's status.
//
// Expressions are @cel calls of the kro library (pkg/expression/celkro).
// Errors are *Error with the path into the RGD: those of CRD, Instance and
// BuildGraph, and what the pipeline cannot express (a resource of the
// instance kind, one kind under two versions, a map key starting with $ or @
// beside expressions).
func Compile(rgd *krov1a1.ResourceGraphDefinition) (*Compiled, error) {
	if rgd == nil {
		return nil, errorf("", "no ResourceGraphDefinition")
	}
	crd, err := CRD(rgd)
	if err != nil {
		return nil, err
	}
	inst, err := Instance(rgd.Spec.Schema)
	if err != nil {
		return nil, err
	}
	in, err := graphInput(rgd)
	if err != nil {
		return nil, err
	}
	g, err := BuildGraph(in)
	if err != nil {
		return nil, err
	}
	c := &rgdCompiler{rgd: rgd, inst: inst, g: g, in: in, kinds: map[string]*kindSource{}}
	ctrl, err := c.controller()
	if err != nil {
		return nil, err
	}
	op := &opv1a1.Operator{
		TypeMeta:   metav1.TypeMeta{APIVersion: opv1a1.GroupVersion.String(), Kind: "Operator"},
		ObjectMeta: metav1.ObjectMeta{Name: OperatorName(rgd.Name)},
		Spec:       opv1a1.OperatorSpec{Controllers: []opv1a1.Controller{*ctrl}},
	}
	return &Compiled{CRD: crd, Operator: op}, nil
}

// graphInput decodes the RGD's resources and status.
func graphInput(rgd *krov1a1.ResourceGraphDefinition) (GraphInput, error) {
	var in GraphInput
	for i, r := range rgd.Spec.Resources {
		path := Index("spec.resources", i)
		if r == nil {
			return in, errorf(path, "a resource is required")
		}
		ri := ResourceInput{ID: r.ID, ReadyWhen: r.ReadyWhen, IncludeWhen: r.IncludeWhen}
		if len(r.Template.Raw) > 0 {
			m, err := decodeJSONObject(r.Template.Raw)
			if err != nil {
				return in, errorf(Field(path, "template"), "%v", err)
			}
			ri.Template = m
		}
		if r.ExternalRef != nil {
			b, err := json.Marshal(r.ExternalRef)
			if err != nil {
				return in, errorf(Field(path, "externalRef"), "%v", err)
			}
			m, err := decodeJSONObject(b)
			if err != nil {
				return in, errorf(Field(path, "externalRef"), "%v", err)
			}
			ri.ExternalRef = m
		}
		for _, d := range r.ForEach {
			ri.ForEach = append(ri.ForEach, map[string]string(d))
		}
		in.Resources = append(in.Resources, ri)
	}
	if raw := rgd.Spec.Schema.Status.Raw; len(raw) > 0 {
		m, err := decodeJSONObject(raw)
		if err != nil {
			return in, errorf("spec.schema.status", "%v", err)
		}
		in.Status = m
	}
	return in, nil
}

// decodeMap decodes a JSON object, numbers kept exact as json.Number.
func decodeJSONObject(raw []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("an object is required")
	}
	return m, nil
}

// kindSource is one source of the controller.
type kindSource struct {
	gvk schema.GroupVersionKind
	// external: some externalRef reads this kind, so the source is not
	// restricted to the RGD's labelled objects.
	external bool
	path     string
}

type rgdCompiler struct {
	rgd   *krov1a1.ResourceGraphDefinition
	inst  InstanceKind
	g     *Graph
	in    GraphInput
	kinds map[string]*kindSource // by kind
	order []string               // kinds in order of first use
	// dependents are, by resource id, the template resources whose
	// templates read it (see dependents).
	dependents map[string][]*Node
}

// deletingStream is the stream of the keys of the instances being deleted
// (metadata.deletionTimestamp set): {"instance": {"name", "namespace"}}.
const deletingStream = "deleting_instances"

// held is the stream of the instances being deleted whose resource id
// still exists and is still read by an existing dependent: {"instance":
// key} (and "indexes": the kro.run/collection-index labels of the existing
// items, for a collection).
func held(id string) string { return "held_" + id }

// dependents returns, by resource id, the template resources (never an
// externalRef: it is not deleted, so it would hold its dependencies
// forever) that depend on it, for the template resources only (an
// externalRef is never deleted). Ids no template depends on are absent.
func dependents(g *Graph) map[string][]*Node {
	out := map[string][]*Node{}
	for _, n := range g.Nodes {
		if n.External {
			continue
		}
		for _, d := range n.DependsOn {
			if dn := g.Node(d); dn != nil && !dn.External {
				out[d] = append(out[d], n)
			}
		}
	}
	return out
}

// deletingBranch makes deletingStream: the key of each instance with a
// deletionTimestamp (only the key, so that the held branches do not run
// again on the instance's other changes).
func (c *rgdCompiler) deletingBranch() []any {
	return []any{
		map[string]any{"@inputs": []any{c.inst.Kind}},
		map[string]any{"@select": map[string]any{"@exists": "$.metadata.deletionTimestamp"}},
		map[string]any{"@project": map[string]any{"instance": c.instanceKey("$")}},
		map[string]any{"@output": deletingStream},
	}
}

// heldBranch makes held(n.ID), the deletion order: while an instance is
// being deleted, its resource n is kept (still produced) as long as it
// exists and some resource that depends on it exists (in the observed
// state, so one with its own finalizers holds n until it is gone). This
// is kro's rule that dependents are deleted before their dependencies;
// a resource nothing depends on goes at once.
func (c *rgdCompiler) heldBranch(n *Node) []any {
	ds := c.dependents[n.ID]
	inputs := []any{deletingStream, observed(n.ID)}
	var conds, soft, exists []any
	eq := func(id string) {
		r := "$." + observed(id) + ".instance"
		conds = append(conds, map[string]any{"@eq": []any{r + ".name", "$." + deletingStream + ".instance.name"}})
		if c.inst.Namespaced {
			conds = append(conds, map[string]any{"@eq": []any{r + ".namespace", "$." + deletingStream + ".instance.namespace"}})
		}
	}
	eq(n.ID)
	for _, d := range ds {
		inputs = append(inputs, observed(d.ID))
		eq(d.ID)
		soft = append(soft, observed(d.ID))
		exists = append(exists, map[string]any{"@exists": "$." + observed(d.ID)})
	}
	out := map[string]any{"instance": "$." + deletingStream + ".instance"}
	if n.Collection {
		out["indexes"] = map[string]any{"@cel": map[string]any{
			"expr":    fmt.Sprintf("items.map(x, x.metadata.labels[%q])", LabelCollectionIndex),
			"vars":    map[string]any{"items": map[string]any{"@definedOr": []any{"$." + observed(n.ID) + ".items", []any{}}}},
			"library": "kro",
		}}
	}
	return []any{
		map[string]any{"@inputs": inputs},
		map[string]any{"@join": []any{map[string]any{"@and": conds}, map[string]any{"soft": soft}}},
		map[string]any{"@select": map[string]any{"@or": exists}},
		map[string]any{"@project": out},
		map[string]any{"@output": held(n.ID)},
	}
}

// observed is the stream of a resource's observed objects, one document
// per instance: {"instance": {"name", "namespace"}, "object": obj} (or
// "items": [obj, ...] for a collection).
func observed(id string) string { return "observed_" + id }

// wanted is the stream of an externalRef's name and namespace per instance.
func wanted(id string) string { return "wanted_" + id }

func gvkOf(apiVersion, kind string) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

func (c *rgdCompiler) addKind(path string, gvk schema.GroupVersionKind, external bool) error {
	if gvk.Kind == c.inst.Kind {
		return errorf(Field(path, "kind"), "a resource of the instance kind %s is not supported (one source per kind)", gvk.Kind)
	}
	if k, ok := c.kinds[gvk.Kind]; ok {
		if k.gvk != gvk {
			return errorf(Field(path, "apiVersion"), "kind %s is also used as %s at %s; one kind must keep one group and version", gvk.Kind, k.gvk.GroupVersion(), k.path)
		}
		k.external = k.external || external
		return nil
	}
	c.kinds[gvk.Kind] = &kindSource{gvk: gvk, external: external, path: path}
	c.order = append(c.order, gvk.Kind)
	return nil
}

func (c *rgdCompiler) namespaced(gvk schema.GroupVersionKind) bool {
	return !clusterScopedKinds[gvk.Group+"/"+gvk.Kind]
}

// checkScope applies kro's rules on metadata.namespace (kro's
// validateTemplateConstraints) to the template or externalRef at path, for
// the kinds whose scope is known without discovery (clusterScopedKinds;
// any other kind is namespaced): a cluster-scoped kind must not set it; a
// namespaced kind must set it when the instance kind is cluster-scoped
// (spec.schema.scope: Cluster: there is no instance namespace to take),
// except an externalRef by selector, which then lists every namespace.
func (c *rgdCompiler) checkScope(n *Node, path string) error {
	r := c.in.Resources[n.Index]
	obj := r.Template
	if n.External {
		obj = r.ExternalRef
	}
	gvk := c.resourceGVK(n)
	md, _ := obj["metadata"].(map[string]any)
	ns, found := md["namespace"]
	if !c.namespaced(gvk) {
		if found {
			return errorf(Field(Field(path, "metadata"), "namespace"), "%s is cluster-scoped and must not set metadata.namespace", gvk.Kind)
		}
		return nil
	}
	if c.inst.Namespaced || (n.External && n.Collection) {
		return nil
	}
	if s, ok := ns.(string); !found || (ok && strings.TrimSpace(s) == "") {
		return errorf(Field(path, "metadata"), "%s is namespaced and must set metadata.namespace: the instance kind is cluster-scoped (spec.schema.scope: Cluster)", gvk.Kind)
	}
	return nil
}

// resourceGVK is the kind a resource's template or externalRef names.
func (c *rgdCompiler) resourceGVK(n *Node) schema.GroupVersionKind {
	r := c.in.Resources[n.Index]
	obj := r.Template
	if n.External {
		obj = r.ExternalRef
	}
	av, _ := obj["apiVersion"].(string)
	k, _ := obj["kind"].(string)
	return gvkOf(av, k)
}

func (c *rgdCompiler) controller() (*opv1a1.Controller, error) {
	for _, n := range c.g.Nodes {
		p := Field(n.Path, "template")
		if n.External {
			p = Field(n.Path, "externalRef")
		}
		if err := c.checkScope(n, p); err != nil {
			return nil, err
		}
		if err := c.addKind(p, c.resourceGVK(n), n.External); err != nil {
			return nil, err
		}
	}
	ik := c.inst.Kind
	group, version := c.inst.Group, c.inst.Version
	sources := []opv1a1.Source{{Resource: opv1a1.Resource{APIGroup: &group, Version: &version, Kind: ik}}}
	for _, k := range c.order {
		ks := c.kinds[k]
		g, v := ks.gvk.Group, ks.gvk.Version
		s := opv1a1.Source{Resource: opv1a1.Resource{APIGroup: &g, Version: &v, Kind: k}}
		if !ks.external {
			s.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{LabelRGDName: c.rgd.Name}}
		}
		sources = append(sources, s)
	}
	var branches []any
	var targets []opv1a1.Target
	c.dependents = dependents(c.g)
	if len(c.dependents) > 0 {
		branches = append(branches, c.deletingBranch())
	}
	for _, id := range c.g.Order {
		n := c.g.Node(id)
		obs, err := c.observedBranches(n)
		if err != nil {
			return nil, err
		}
		branches = append(branches, obs...)
		if n.External {
			continue
		}
		if len(c.dependents[n.ID]) > 0 {
			branches = append(branches, c.heldBranch(n))
		}
		bs, err := c.resourceBranch(n)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			branches = append(branches, b)
		}
		pb, err := c.pendingBranches(n)
		if err != nil {
			return nil, err
		}
		for _, b := range pb {
			branches = append(branches, b)
		}
		gvk := c.resourceGVK(n)
		g, v := gvk.Group, gvk.Version
		targets = append(targets, opv1a1.Target{Name: n.ID, Resource: opv1a1.Resource{APIGroup: &g, Version: &v, Kind: gvk.Kind}, Type: opv1a1.Updater})
	}
	sb, err := c.statusBranch()
	if err != nil {
		return nil, err
	}
	branches = append(branches, sb)
	targets = append(targets, opv1a1.Target{Resource: opv1a1.Resource{APIGroup: &group, Version: &version, Kind: ik}, Type: opv1a1.Patcher})
	raw, err := json.Marshal(branches)
	if err != nil {
		return nil, errorf("spec", "encoding the pipeline: %v", err)
	}
	return &opv1a1.Controller{Name: ControllerName, Sources: sources, Pipeline: apiextensionsv1.JSON{Raw: raw}, Targets: targets}, nil
}

// label is the JSONPath of a label of the subject at root.
func label(root, key string) string { return root + ".metadata.labels['" + key + "']" }

// instanceKey projects the instance name and namespace a managed object's
// labels name.
func (c *rgdCompiler) instanceKeyFromLabels(root string) map[string]any {
	k := map[string]any{"name": label(root, LabelInstanceName)}
	if c.inst.Namespaced {
		k["namespace"] = label(root, LabelInstanceNS)
	}
	return k
}

func (c *rgdCompiler) instanceKey(root string) map[string]any {
	k := map[string]any{"name": root + ".metadata.name"}
	if c.inst.Namespaced {
		k["namespace"] = root + ".metadata.namespace"
	}
	return k
}

// observedBranches are the branches that make observed(n.ID).
func (c *rgdCompiler) observedBranches(n *Node) ([]any, error) {
	gvk := c.resourceGVK(n)
	kind := gvk.Kind
	if !n.External {
		sel := map[string]any{"@and": []any{
			map[string]any{"@eq": []any{label("$", LabelNodeID), n.ID}},
			map[string]any{"@eq": []any{label("$", LabelRGDName), c.rgd.Name}},
		}}
		b := []any{
			map[string]any{"@inputs": []any{kind}},
			map[string]any{"@select": sel},
		}
		if n.Collection {
			// The items in kro's order, by collection index, sorted here
			// once per change of the collection (n·log n) rather than in
			// every expression that reads them.
			ia := map[string]any{"@int": label("$$.a", LabelCollectionIndex)}
			ib := map[string]any{"@int": label("$$.b", LabelCollectionIndex)}
			items := map[string]any{"@sortBy": []any{
				map[string]any{"@switch": []any{
					[]any{map[string]any{"@lt": []any{ia, ib}}, -1},
					[]any{map[string]any{"@gt": []any{ia, ib}}, 1},
					[]any{true, 0},
				}}, "$.values"}}
			b = append(b,
				map[string]any{"@groupBy": []any{c.instanceKeyFromLabels("$"), "$"}},
				map[string]any{"@project": map[string]any{"instance": "$.key", "items": items}})
		} else {
			b = append(b, map[string]any{"@project": map[string]any{"instance": c.instanceKeyFromLabels("$"), "object": "$"}})
		}
		return []any{append(b, map[string]any{"@output": observed(n.ID)})}, nil
	}
	// An externalRef: name (or selector) and namespace per instance.
	ref := c.in.Resources[n.Index].ExternalRef
	md, _ := ref["metadata"].(map[string]any)
	bind := c.binding("$", false, nil)
	nsExpr := any(nil)
	kindNamespaced := c.namespaced(gvk)
	if kindNamespaced {
		if v, ok := md["namespace"]; ok && v != "" {
			x, err := c.value(v, Field(Field(Field(n.Path, "externalRef"), "metadata"), "namespace"), "metadata.namespace", n, bind)
			if err != nil {
				return nil, err
			}
			nsExpr = x
		} else if n.Collection {
			// A selector without a namespace lists every namespace
			// (kro's docs, 05-external-references.md).
		} else if c.inst.Namespaced {
			nsExpr = "$.metadata.namespace"
		} else {
			nsExpr = "default"
		}
	}
	want := map[string]any{"instance": c.instanceKey("$")}
	if nsExpr != nil {
		want["namespace"] = nsExpr
	}
	objRoot := "$." + kind
	wroot := "$." + wanted(n.ID)
	conds := []any{}
	if nsExpr != nil {
		conds = append(conds, map[string]any{"@eq": []any{wroot + ".namespace", objRoot + ".metadata.namespace"}})
	}
	if !n.Collection {
		x, err := c.value(md["name"], Field(Field(Field(n.Path, "externalRef"), "metadata"), "name"), "metadata.name", n, bind)
		if err != nil {
			return nil, err
		}
		want["name"] = x
		conds = append(conds, map[string]any{"@eq": []any{wroot + ".name", objRoot + ".metadata.name"}})
	} else {
		selPath := Field(Field(Field(n.Path, "externalRef"), "metadata"), "selector")
		x, err := c.value(md["selector"], selPath, "metadata.selector", n, bind)
		if err != nil {
			return nil, err
		}
		want["selector"] = x
	}
	b1 := []any{
		map[string]any{"@inputs": []any{c.inst.Kind}},
		map[string]any{"@project": want},
		map[string]any{"@output": wanted(n.ID)},
	}
	b2 := []any{map[string]any{"@inputs": []any{wanted(n.ID), kind}}}
	if len(conds) == 0 {
		// Read by selector from a cluster-scoped kind or every
		// namespace: every object is a candidate (no hash key).
		conds = append(conds, true)
	}
	b2 = append(b2, map[string]any{"@join": map[string]any{"@and": conds}})
	if n.Collection {
		b2 = append(b2,
			map[string]any{"@select": map[string]any{"@selector": []any{wroot + ".selector", objRoot + ".metadata.labels"}}},
			map[string]any{"@groupBy": []any{wroot + ".instance", objRoot}},
			map[string]any{"@project": map[string]any{"instance": "$.key", "items": "$.values"}})
	} else {
		b2 = append(b2, map[string]any{"@project": map[string]any{"instance": wroot + ".instance", "object": objRoot}})
	}
	b2 = append(b2, map[string]any{"@output": observed(n.ID)})
	return []any{b1, b2}, nil
}

// binding says where each CEL variable is in a branch's subject: schema
// at root (or root.<Kind> when compound), each resource in deps at its
// observed stream.
type binding struct {
	vars map[string]any
}

// binding returns the variables of a subject rooted at root: compound
// (joined, keyed by input names) or the instance itself, with the
// observed resources deps.
func (c *rgdCompiler) binding(root string, compound bool, deps []*Node) binding {
	b := binding{vars: map[string]any{}}
	if compound {
		b.vars[SchemaVar] = root + "." + c.inst.Kind
	} else {
		b.vars[SchemaVar] = root
	}
	for _, d := range deps {
		p := root + "." + observed(d.ID)
		if d.Collection {
			// A template collection's items come sorted by collection
			// index (see observedBranches).
			b.vars[d.ID] = map[string]any{"@definedOr": []any{p + ".items", []any{}}}
		} else {
			b.vars[d.ID] = p + ".object"
		}
	}
	return b
}

// celCall is the @cel call evaluating src with the variables names bound.
func (b binding) celCall(src string, names []string) (map[string]any, error) {
	vars := map[string]any{}
	for _, n := range names {
		v, ok := b.vars[n]
		if !ok {
			return nil, fmt.Errorf("%s is not available here", n)
		}
		vars[n] = v
	}
	return map[string]any{"@cel": map[string]any{"expr": src, "vars": vars, "library": "kro"}}, nil
}

// value converts a template (or externalRef) value at path (rel inside the
// object) into a pipeline expression: literals (wrapped in @literal where
// the expression language would read them otherwise) and @cel calls for
// the strings that hold ${...}.
func (c *rgdCompiler) value(v any, path, rel string, n *Node, b binding) (any, error) {
	if !holdsExpr(v) {
		if needsLiteral(v) {
			return map[string]any{"@literal": v}, nil
		}
		return v, nil
	}
	switch x := v.(type) {
	case string:
		f, err := ParseField(path, x)
		if err != nil {
			return nil, err
		}
		cf := c.field(n, rel)
		src, names := f.CEL(), []string(nil)
		if cf != nil {
			names = cf.Expr.Names()
		} else {
			x, err := c.g.Env.Compile(src)
			if err != nil {
				return nil, &Error{Path: path, Err: err}
			}
			names = x.Names()
		}
		call, err := b.celCall(src, names)
		if err != nil {
			return nil, errorf(path, "%v", err)
		}
		return call, nil
	case map[string]any:
		out := map[string]any{}
		for _, k := range sortedKeys(x) {
			if strings.HasPrefix(k, "$") || strings.HasPrefix(k, "@") {
				return nil, errorf(Field(path, k), "a key starting with %q beside expressions is not supported", k[:1])
			}
			e, err := c.value(x[k], Field(path, k), joinRelKey(rel, k), n, b)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			y, err := c.value(e, Index(path, i), Index(rel, i), n, b)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	}
	return v, nil
}

func joinRelKey(rel, k string) string {
	return Field(rel, k)
}

// field returns the compiled field of n at rel, or nil.
func (c *rgdCompiler) field(n *Node, rel string) *CompiledField {
	if n == nil {
		return nil
	}
	for _, f := range n.Fields {
		if f.Rel == rel {
			return f
		}
	}
	return nil
}

// holdsExpr reports whether v holds a string with ${...}.
func holdsExpr(v any) bool {
	switch x := v.(type) {
	case string:
		f, err := ParseField("", x)
		return err != nil || f != nil
	case map[string]any:
		for _, e := range x {
			if holdsExpr(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsExpr(e) {
				return true
			}
		}
	}
	return false
}

// needsLiteral reports whether the expression language would read v as
// something other than itself: a string starting with $ (a JSONPath) or
// "@now", a map key starting with $ (a setter) or @ (an operator).
func needsLiteral(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.HasPrefix(x, "$") || x == "@now"
	case map[string]any:
		for k, e := range x {
			if strings.HasPrefix(k, "$") || strings.HasPrefix(k, "@") || needsLiteral(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if needsLiteral(e) {
				return true
			}
		}
	}
	return false
}

// conj is the CEL conjunction of the sources, "true" for none.
func conj(srcs []string) string {
	if len(srcs) == 0 {
		return "true"
	}
	parts := make([]string, len(srcs))
	for i, s := range srcs {
		parts[i] = "(" + s + ")"
	}
	return strings.Join(parts, " && ")
}

// readySrc is the CEL saying that resource d, bound to the variable d.ID,
// is ready: it exists and its readyWhen holds; for a collection, all its
// items are there (as many as their kro.run/collection-size label says) and
// readyWhen holds for each.
func readySrc(d *Node) string {
	var conds []string
	for _, r := range d.ReadyWhen {
		conds = append(conds, r.Expr.Source)
	}
	if d.Collection {
		if d.External {
			if len(conds) == 0 {
				return "true"
			}
			return fmt.Sprintf("%s.all(%s, %s)", d.ID, EachVar, conj(conds))
		}
		s := fmt.Sprintf("(size(%[1]s) == 0 || size(%[1]s) == int(%[1]s[0].metadata.labels[%[2]q]))", d.ID, LabelCollectionSize)
		if len(conds) > 0 {
			s += fmt.Sprintf(" && %s.all(%s, %s)", d.ID, EachVar, conj(conds))
		}
		return s
	}
	return fmt.Sprintf("%s != null && %s", d.ID, conj(conds))
}

// completeVar is the CEL variable of the status branch holding the number
// of desired objects of template resource id when they are all produced
// (completeOf), else -1. Resource ids have no "_", so it is no id.
func completeVar(id string) string { return "_complete_" + id }

// statusReadySrc is the CEL saying, in the status branch, that resource d
// is ready: an externalRef as readySrc; a template resource when its
// desired objects are all produced (it is not pending) and they exist and
// are ready: one object, or as many items as its forEach gives, each
// ready.
func statusReadySrc(d *Node) string {
	if d.External {
		return readySrc(d)
	}
	cv := completeVar(d.ID)
	if !d.Collection {
		return fmt.Sprintf("%s == 1 && %s", cv, readySrc(d))
	}
	s := fmt.Sprintf("%s >= 0 && size(%s) == %s", cv, d.ID, cv)
	var conds []string
	for _, r := range d.ReadyWhen {
		conds = append(conds, r.Expr.Source)
	}
	if len(conds) > 0 {
		s += fmt.Sprintf(" && %s.all(%s, %s)", d.ID, EachVar, conj(conds))
	}
	return s
}

// names returns the distinct variable names of the expressions.
func names(xs ...*Expression) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		for _, n := range x.Names() {
			if n == EachVar || seen[n] {
				continue
			}
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// resourceBranch is the branch that makes the desired objects of template
// resource n, desiredOf(n.ID) (for a collection two: the items, itemsOf,
// then the objects).
func (c *rgdCompiler) resourceBranch(n *Node) ([][]any, error) {
	var split [][]any
	ik := c.inst.Kind
	var deps []*Node
	for _, id := range n.DependsOn {
		deps = append(deps, c.g.Node(id))
	}
	inputs := []any{ik}
	for _, d := range deps {
		inputs = append(inputs, observed(d.ID))
	}
	hasHeld := len(c.dependents[n.ID]) > 0
	if hasHeld {
		inputs = append(inputs, held(n.ID))
	}
	stages := []any{map[string]any{"@inputs": inputs}}
	compound := len(inputs) > 1
	if compound {
		var conds []any
		var soft []any
		eq := func(r string) {
			conds = append(conds, map[string]any{"@eq": []any{r + ".name", "$." + ik + ".metadata.name"}})
			if c.inst.Namespaced {
				conds = append(conds, map[string]any{"@eq": []any{r + ".namespace", "$." + ik + ".metadata.namespace"}})
			}
		}
		for _, d := range deps {
			eq("$." + observed(d.ID) + ".instance")
			if d.Collection {
				soft = append(soft, observed(d.ID))
			}
		}
		if hasHeld {
			eq("$." + held(n.ID) + ".instance")
			soft = append(soft, held(n.ID))
		}
		var join any = map[string]any{"@and": conds}
		if len(soft) > 0 {
			join = []any{join, map[string]any{"soft": soft}}
		}
		stages = append(stages, map[string]any{"@join": join})
	}
	b := c.binding("$", compound, deps)
	// Deletion: while the instance has a deletionTimestamp, the resource
	// is produced only while held (it exists and an existing resource
	// depends on it), so the Updater deletes the dependents first and
	// creates nothing new.
	deleting := map[string]any{"@exists": b.vars[SchemaVar].(string) + ".metadata.deletionTimestamp"}
	if !n.Collection {
		var keep any = map[string]any{"@not": deleting}
		if hasHeld {
			keep = map[string]any{"@or": []any{keep, map[string]any{"@exists": "$." + held(n.ID)}}}
		}
		stages = append(stages, map[string]any{"@select": keep})
	}
	// Gate: the dependencies are ready, the resource is included.
	var gate []string
	var gateX []*Expression
	for _, d := range deps {
		gate = append(gate, readySrc(d))
		gateX = append(gateX, readyWhenExprs(d)...)
	}
	for _, w := range n.IncludeWhen {
		gate = append(gate, w.Expr.Source)
		gateX = append(gateX, w.Expr)
	}
	if len(gate) > 0 {
		nm := names(gateX...)
		for _, d := range deps {
			if !contains(nm, d.ID) {
				nm = append(nm, d.ID)
			}
		}
		call, err := b.celCall(conj(gate), nm)
		if err != nil {
			return nil, errorf(n.Path, "%v", err)
		}
		// A held resource stays while its dependencies' readiness changes.
		stages = append(stages, map[string]any{"@select": map[string]any{"@or": []any{deleting, call}}})
	}
	root := "$"
	if len(n.ForEach) > 0 {
		// The items: the Cartesian product of the dimensions, in order,
		// each with its index and the collection's size.
		var xs []*Expression
		for _, it := range n.ForEach {
			xs = append(xs, it.Expr)
		}
		call, err := b.celCall(productSrc(n.ForEach), names(xs...))
		if err != nil {
			return nil, errorf(Field(n.Path, "forEach"), "%v", err)
		}
		stages = append(stages,
			map[string]any{"@project": map[string]any{"ctx": "$", "items": call}},
			map[string]any{"@output": itemsOf(n.ID)})
		// The items go on to the next branch, and to the expected count
		// (see pendingBranches).
		split = append(split, stages)
		stages = []any{
			map[string]any{"@inputs": []any{itemsOf(n.ID)}},
			map[string]any{"@unwind": "$.items"}}
		root = "$.ctx"
		b = c.binding(root, compound, deps)
		for _, it := range n.ForEach {
			b.vars[it.Name] = "$.items.item." + it.Name
		}
		// Deletion of a collection: only the items that exist are held.
		deletingItem := map[string]any{"@exists": b.vars[SchemaVar].(string) + ".metadata.deletionTimestamp"}
		var keep any = map[string]any{"@not": deletingItem}
		if hasHeld {
			keep = map[string]any{"@or": []any{keep, map[string]any{"@cel": map[string]any{
				"expr":    "held != null && string(index) in held.indexes",
				"vars":    map[string]any{"held": root + "." + held(n.ID), "index": "$.items.index"},
				"library": "kro",
			}}}}
		}
		stages = append(stages, map[string]any{"@select": keep})
	}
	// Guard: every expression of the template resolves (kro waits for data
	// that is not there yet).
	if len(n.Fields) > 0 {
		var srcs []string
		var xs []*Expression
		seen := map[string]bool{}
		for _, f := range n.Fields {
			if seen[f.Expr.Source] {
				continue
			}
			seen[f.Expr.Source] = true
			srcs = append(srcs, "("+f.Expr.Source+")")
			xs = append(xs, f.Expr)
		}
		call, err := b.celCall("size(["+strings.Join(srcs, ", ")+"]) >= 0", names(xs...))
		if err != nil {
			return nil, errorf(n.Path, "%v", err)
		}
		stages = append(stages, map[string]any{"@select": call})
	}
	tmpl := c.in.Resources[n.Index].Template
	obj, err := c.value(tmpl, Field(n.Path, "template"), "", n, b)
	if err != nil {
		return nil, err
	}
	instRoot := b.vars[SchemaVar].(string)
	gvk := c.resourceGVK(n)
	labels := map[string]any{
		LabelOwned:           "true",
		LabelKroVersion:      KroVersion,
		LabelManagedBy:       ManagedByValue,
		LabelInstanceName:    instRoot + ".metadata.name",
		LabelInstanceGroup:   c.inst.Group,
		LabelInstanceVersion: c.inst.Version,
		LabelInstanceKind:    c.inst.Kind,
		LabelRGDID:           string(c.rgd.UID),
		LabelRGDName:         c.rgd.Name,
		LabelNodeID:          n.ID,
	}
	if c.inst.Namespaced {
		labels[LabelInstanceNS] = instRoot + ".metadata.namespace"
	}
	if len(n.ForEach) > 0 {
		labels[LabelCollectionIndex] = map[string]any{"@string": "$.items.index"}
		labels[LabelCollectionSize] = map[string]any{"@string": "$.items.size"}
	}
	meta := map[string]any{"labels": labels}
	if md, _ := tmpl["metadata"].(map[string]any); md["namespace"] == nil && c.inst.Namespaced && c.namespaced(gvk) {
		meta["namespace"] = instRoot + ".metadata.namespace"
	}
	owner := map[string]any{
		"metadata": map[string]any{
			"labels": map[string]any{LabelInstanceID: instRoot + ".metadata.uid"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": schema.GroupVersion{Group: c.inst.Group, Version: c.inst.Version}.String(),
				"kind":       c.inst.Kind,
				"name":       instRoot + ".metadata.name",
				"uid":        instRoot + ".metadata.uid",
				"controller": true,
			}},
		},
	}
	// An owner reference names an owner in the dependent's own namespace
	// (or a cluster-scoped one): the garbage collector looks the owner up
	// there and deletes a dependent whose owner it cannot find. So a
	// resource in another namespace than the instance's, or a
	// cluster-scoped one of a namespaced instance, gets no owner reference.
	var ownerIf any = map[string]any{"@exists": instRoot + ".metadata.uid"}
	objNS := any(nil)
	if m, ok := obj.(map[string]any); ok {
		if md, ok := m["metadata"].(map[string]any); ok {
			objNS = md["namespace"]
		}
	}
	switch {
	case c.inst.Namespaced && !c.namespaced(gvk):
		ownerIf = false
	case c.inst.Namespaced && objNS != nil:
		ownerIf = map[string]any{"@and": []any{ownerIf, map[string]any{"@eq": []any{objNS, instRoot + ".metadata.namespace"}}}}
	}
	stages = append(stages,
		map[string]any{"@project": []any{
			obj,
			map[string]any{"metadata": meta},
			map[string]any{"@cond": []any{ownerIf, owner, map[string]any{}}},
		}},
		map[string]any{"@output": desiredOf(n.ID)})
	return append(split, stages), nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func readyWhenExprs(d *Node) []*Expression {
	var out []*Expression
	for _, r := range d.ReadyWhen {
		out = append(out, r.Expr)
	}
	return out
}

// productSrc is the CEL making a forEach's items: the Cartesian product of
// its dimensions, the first dimension outermost (kro's order), as a list of
// {"item": {iterator: value, ...}, "index": i, "size": n}; no items when
// the product has more than MaxCollectionSize (kro's limit: the status
// says so, see sizeCheckSrc), checked on the dimensions' sizes before the
// product is made.
func productSrc(dims []*Iterator) string {
	// cel.bind(__d0, e0, cel.bind(__d1, e1, over ? [] :
	// __d0.map(v0, __d1.map(v1, {"i1": v0, "i2": v1})).flatten(k-1)))
	inner := "{"
	for i, d := range dims {
		if i > 0 {
			inner += ", "
		}
		inner += fmt.Sprintf("%q: __v%d", d.Name, i)
	}
	inner += "}"
	s := inner
	for i := len(dims) - 1; i >= 0; i-- {
		s = fmt.Sprintf("__d%d.map(__v%d, %s)", i, i, s)
	}
	if len(dims) > 1 {
		s = fmt.Sprintf("(%s).flatten(%d)", s, len(dims)-1)
	}
	var over []string
	product := ""
	for i := range dims {
		if i > 0 {
			product += " * "
		}
		product += fmt.Sprintf("double(size(__d%d))", i)
	}
	over = append(over, fmt.Sprintf("%s > %d.0", product, MaxCollectionSize))
	s = fmt.Sprintf("cel.bind(__items, %s ? [] : %s, lists.range(size(__items)).map(__i, {\"item\": __items[__i], \"index\": __i, \"size\": size(__items)}))", over[0], s)
	for i := len(dims) - 1; i >= 0; i-- {
		s = fmt.Sprintf("cel.bind(__d%d, (%s), %s)", i, dims[i].Expr.Source, s)
	}
	return s
}

// statusBranch is the branch that writes each instance's status: the
// instance left-joined with every resource's observed state, then three
// projections:
//
//  1. "ctx", the joined subject; "ready", the graph's readiness (computed
//     once); "fields", each spec.schema.status field under @try, so that
//     one that fails leaves the others; "sizes", each template
//     collection's size check (over MaxCollectionSize) under @try;
//  2. "statusError", the failing fields, each as "<path in the RGD>:
//     <cause>", and "resourceError", the collections over the limit or
//     whose forEach fails, likewise; each joined by "; ", "" for none;
//  3. the status: the fields (a failing one unset), kro's state (ERROR
//     when either error is set) and conditions (GraphResolved False with
//     the status errors, ResourcesReady False with the resource errors,
//     Ready False with the first of them).
func (c *rgdCompiler) statusBranch() ([]any, error) {
	ik := c.inst.Kind
	inputs := []any{ik}
	var conds, soft []any
	for _, n := range c.g.Nodes {
		inputs = append(inputs, observed(n.ID))
		r := "$." + observed(n.ID) + ".instance"
		conds = append(conds, map[string]any{"@eq": []any{r + ".name", "$." + ik + ".metadata.name"}})
		if c.inst.Namespaced {
			conds = append(conds, map[string]any{"@eq": []any{r + ".namespace", "$." + ik + ".metadata.namespace"}})
		}
		soft = append(soft, observed(n.ID))
	}
	// Whether each template resource's desired objects are all produced
	// (see pendingBranches).
	for _, n := range c.g.Nodes {
		if n.External {
			continue
		}
		inputs = append(inputs, completeOf(n.ID))
		conds = append(conds, c.instanceEq("$."+completeOf(n.ID)+".instance", "$."+ik+".metadata")...)
		soft = append(soft, completeOf(n.ID))
	}
	stages := []any{map[string]any{"@inputs": inputs}}
	compound := len(c.g.Nodes) > 0
	if compound {
		stages = append(stages, map[string]any{"@join": []any{map[string]any{"@and": conds}, map[string]any{"soft": soft}}})
	}
	b := c.binding("$", compound, c.g.Nodes)
	for _, n := range c.g.Nodes {
		if !n.External {
			b.vars[completeVar(n.ID)] = map[string]any{"@definedOr": []any{"$." + completeOf(n.ID) + ".size", -1}}
		}
	}
	status := map[string]any{}
	fields := map[string]any{}
	var statusMsgs []string
	for i, f := range c.g.Status {
		// A field reading a resource that is not there is null, as kro
		// leaves it unset.
		nm := f.Expr.Names()
		src := f.Expr.Source
		if m := missingSrc(c.g, nm); m != "" {
			src = fmt.Sprintf("(%s) ? null : dyn(%s)", m, src)
		}
		call, err := b.celCall(src, nm)
		if err != nil {
			return nil, errorf(f.Path, "%v", err)
		}
		key := fmt.Sprintf("f%d", i)
		fields[key] = map[string]any{"@try": call}
		if err := setPath(status, f.Rel, "$.fields."+key+".value"); err != nil {
			return nil, errorf(f.Path, "%v", err)
		}
		statusMsgs = append(statusMsgs, fmt.Sprintf(`(has(f.%[1]s.error) ? [%[2]q + ": " + string(f.%[1]s.error)] : [])`, key, f.Path))
	}
	// Every included resource exists, is ready and is not pending (its
	// desired objects are all produced): "waiting" names the others. Each
	// resource is its own call, so that one that cannot be evaluated yet
	// (null) counts as waiting without hiding the others. Each collection
	// is within MaxCollectionSize.
	var waits []any
	size := 0
	included, includedX := c.includedSrc()
	sizes := map[string]any{}
	var resourceMsgs []string
	for _, id := range c.g.Order {
		n := c.g.Node(id)
		incX := includedX[id]
		ok := statusReadySrc(n)
		if included[id] != "true" {
			ok = fmt.Sprintf("(%s) || !(%s)", ok, included[id])
		}
		size += len(ok)
		if size > maxReadySource {
			return nil, errorf("spec.resources", "the readiness expressions of the graph are over %d bytes", maxReadySource)
		}
		if len(n.ForEach) > 0 {
			src, nm := sizeCheckSrc(c.g, n, included[id], incX)
			call, err := b.celCall(src, nm)
			if err != nil {
				return nil, errorf(Field(n.Path, "forEach"), "%v", err)
			}
			key := fmt.Sprintf("c%d", len(sizes))
			sizes[key] = map[string]any{"@try": call}
			resourceMsgs = append(resourceMsgs, fmt.Sprintf(
				`(has(s.%[1]s.error) ? [%[2]q + ": " + string(s.%[1]s.error)] : s.%[1]s.value != null ? [%[2]q + ": " + string(s.%[1]s.value)] : [])`,
				key, Field(n.Path, "forEach")))
		}
		nm := names(append(readyWhenExprs(n), incX...)...)
		if !contains(nm, n.ID) {
			nm = append(nm, n.ID)
		}
		if !n.External {
			nm = append(nm, completeVar(n.ID))
		}
		call, err := b.celCall(ok, nm)
		if err != nil {
			return nil, errorf(n.Path, "%v", err)
		}
		waits = append(waits, map[string]any{"@cond": []any{map[string]any{"@eq": []any{call, true}}, "", id}})
	}
	var waiting any = ""
	if len(waits) > 0 {
		waiting = map[string]any{"@cel": map[string]any{
			"expr":    `ids.filter(x, x != "").join(", ")`,
			"vars":    map[string]any{"ids": waits},
			"library": "kro",
		}}
	}
	joined := func(parts []string, v, root string) any {
		if len(parts) == 0 {
			return ""
		}
		return map[string]any{"@cel": map[string]any{
			"expr":    "(" + strings.Join(parts, " + ") + `).join("; ")`,
			"vars":    map[string]any{v: root},
			"library": "kro",
		}}
	}
	stages = append(stages,
		map[string]any{"@project": map[string]any{"ctx": "$", "waiting": waiting, "fields": fields, "sizes": sizes}},
		map[string]any{"@project": map[string]any{
			"ctx": "$.ctx", "waiting": "$.waiting", "fields": "$.fields",
			"statusError":   joined(statusMsgs, "f", "$.fields"),
			"resourceError": joined(resourceMsgs, "s", "$.sizes"),
		}})
	b = c.binding("$.ctx", compound, c.g.Nodes)
	instRoot := b.vars[SchemaVar].(string)
	isReady := map[string]any{"@eq": []any{"$.waiting", ""}}
	statusErr := map[string]any{"@neq": []any{"$.statusError", ""}}
	resourceErr := map[string]any{"@neq": []any{"$.resourceError", ""}}
	resourceMsg := map[string]any{"@concat": []any{"resource error: ", "$.resourceError"}}
	ifThen := func(c, a, b any) any { return map[string]any{"@cond": []any{c, a, b}} }
	gen := map[string]any{"@definedOr": []any{instRoot + ".metadata.generation", 0}}
	cond := func(typ string, status any, reason any, msg any) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": gen}
	}
	// While the instance is being deleted, kro's state DELETING, and
	// ResourcesReady (so Ready) Unknown, UnderDeletion, naming what is
	// left.
	deleting := map[string]any{"@exists": instRoot + ".metadata.deletionTimestamp"}
	left, err := b.celCall(remainingSrc(c.g), templateIDs(c.g))
	if err != nil {
		return nil, errorf("spec.resources", "%v", err)
	}
	either := func(whenDeleting, otherwise any) any { return ifThen(deleting, whenDeleting, otherwise) }
	status["state"] = either(string(krov1a1.InstanceStateDeleting),
		ifThen(map[string]any{"@or": []any{statusErr, resourceErr}}, string(krov1a1.InstanceStateError),
			ifThen(isReady, string(krov1a1.InstanceStateActive), string(krov1a1.InstanceStateInProgress))))
	status["conditions"] = []any{
		cond(string(krov1a1.InstanceConditionInstanceManaged), "True", "Managed", "the instance's resources carry its labels and owner reference"),
		cond(string(krov1a1.InstanceConditionGraphResolved),
			ifThen(statusErr, "False", "True"),
			ifThen(statusErr, ReasonResolutionFailed, "Resolved"),
			ifThen(statusErr, "$.statusError", "the resource graph is compiled")),
		cond(string(krov1a1.InstanceConditionResourcesReady),
			either("Unknown", ifThen(resourceErr, "False", ifThen(isReady, "True", "False"))),
			either(ReasonUnderDeletion, ifThen(resourceErr, "NotReady", ifThen(isReady, "AllResourcesReady", "NotReady"))),
			either(left, ifThen(resourceErr, resourceMsg, ifThen(isReady, "every included resource exists and is ready",
				map[string]any{"@concat": []any{"waiting for resources to resolve, exist and be ready: ", "$.waiting"}})))),
		cond(string(krov1a1.InstanceConditionReady),
			either("Unknown", ifThen(map[string]any{"@or": []any{statusErr, resourceErr}}, "False", ifThen(isReady, "True", "False"))),
			either(ReasonUnderDeletion, ifThen(statusErr, ReasonResolutionFailed, ifThen(resourceErr, "NotReady", ifThen(isReady, "Ready", "NotReady")))),
			either(left, ifThen(statusErr, "$.statusError", ifThen(resourceErr, resourceMsg, "")))),
	}
	meta := map[string]any{"name": instRoot + ".metadata.name"}
	if c.inst.Namespaced {
		meta["namespace"] = instRoot + ".metadata.namespace"
	}
	stages = append(stages,
		map[string]any{"@project": map[string]any{"metadata": meta, "status": status}},
		map[string]any{"@output": ik})
	return stages, nil
}

// ReasonResolutionFailed is the reason of an instance's GraphResolved and
// Ready conditions (status False) when a spec.schema.status field fails
// to evaluate (kro's reason for a graph it cannot resolve).
const ReasonResolutionFailed = "ResolutionFailed"

// missingSrc is the CEL saying that one of the single resources among
// names is absent (null), "" when names has none.
func missingSrc(g *Graph, names []string) string {
	var missing []string
	for _, name := range names {
		if d := g.Node(name); d != nil && !d.Collection {
			missing = append(missing, name+" == null")
		}
	}
	return strings.Join(missing, " || ")
}

// sizeCheckSrc is the CEL of collection n's size check for the status:
// null while a resource its forEach (or the includeWhen that includes it)
// reads is absent, or while it is not included; else null when the
// Cartesian product of its dimensions has at most MaxCollectionSize items
// and kro's message when it has more. Only the dimensions' sizes are
// multiplied (as doubles, which do not overflow), so the cost is that of
// evaluating the dimensions.
func sizeCheckSrc(g *Graph, n *Node, included string, includedX []*Expression) (string, []string) {
	var xs []*Expression
	var factors []string
	body := ""
	for i, it := range n.ForEach {
		xs = append(xs, it.Expr)
		body += fmt.Sprintf("cel.bind(__d%d, (%s), ", i, it.Expr.Source)
		factors = append(factors, fmt.Sprintf("double(size(__d%d))", i))
	}
	body += fmt.Sprintf(`cel.bind(__n, %s, __n > %d.0 ? dyn("collection size of " + (__n > 1e18 ? "over 10^18" : string(int(__n))) + " is over the maximum collection size of %d") : null)`,
		strings.Join(factors, " * "), MaxCollectionSize, MaxCollectionSize)
	body += strings.Repeat(")", len(n.ForEach))
	if included != "true" {
		body = fmt.Sprintf("!(%s) ? null : %s", included, body)
	}
	nm := names(append(xs, includedX...)...)
	if m := missingSrc(g, nm); m != "" {
		body = fmt.Sprintf("(%s) ? null : %s", m, body)
	}
	return body, nm
}

// ReasonUnderDeletion is the reason of an instance's ResourcesReady and
// Ready conditions (status Unknown) while it is being deleted (kro's).
const ReasonUnderDeletion = "UnderDeletion"

// templateIDs are the ids of the template resources.
func templateIDs(g *Graph) []string {
	var out []string
	for _, n := range g.Nodes {
		if !n.External {
			out = append(out, n.ID)
		}
	}
	return out
}

// remainingSrc is the CEL message of a deleting instance: the template
// resources that still exist, dependents first (reverse topological
// order), each with the finalizers that hold it, or that all are gone.
func remainingSrc(g *Graph) string {
	var parts []string
	for i := len(g.Order) - 1; i >= 0; i-- {
		n := g.Node(g.Order[i])
		if n.External {
			continue
		}
		if n.Collection {
			parts = append(parts, fmt.Sprintf(
				`(size(%[1]s) == 0 ? [] : [%[1]q + " (" + string(size(%[1]s)) + " items" + (%[1]s.exists(x, has(x.metadata.finalizers) && size(x.metadata.finalizers) > 0) ? ", held by finalizers" : "") + ")"])`, n.ID))
			continue
		}
		parts = append(parts, fmt.Sprintf(
			`(%[1]s == null ? [] : [%[1]q + (has(%[1]s.metadata.finalizers) && size(%[1]s.metadata.finalizers) > 0 ? " (finalizers: " + %[1]s.metadata.finalizers.join(", ") + ")" : "")])`, n.ID))
	}
	if len(parts) == 0 {
		return `"deleting: the graph has no resources to delete"`
	}
	return fmt.Sprintf(`cel.bind(left, %s, size(left) == 0 ? "every resource is deleted" : "deleting resources, dependents first; remaining: " + left.join(", "))`, strings.Join(parts, " + "))
}

// maxReadySource bounds the CEL text of the graph's readiness.
const maxReadySource = 1 << 20

// setPath sets the value at a path of Field/Index notation (a.b["c.d"],
// no list indexes) in m.
func setPath(m map[string]any, rel string, v any) error {
	keys, err := splitRel(rel)
	if err != nil {
		return err
	}
	cur := m
	for i, k := range keys {
		if i == len(keys)-1 {
			cur[k] = v
			return nil
		}
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	return nil
}

// splitRel splits a path of Field notation into its keys.
func splitRel(rel string) ([]string, error) {
	var keys []string
	for i := 0; i < len(rel); {
		switch rel[i] {
		case '.':
			i++
		case '[':
			if i+1 < len(rel) && rel[i+1] == '"' {
				// a quoted key: find the closing quote
				j := i + 2
				for ; j < len(rel); j++ {
					if rel[j] == '\\' {
						j++
						continue
					}
					if rel[j] == '"' {
						break
					}
				}
				var k string
				if err := json.Unmarshal([]byte(rel[i+1:j+1]), &k); err != nil {
					return nil, fmt.Errorf("bad path %s", rel)
				}
				keys = append(keys, k)
				i = j + 2
				continue
			}
			return nil, fmt.Errorf("a status field inside a list (%s) is not supported", rel)
		default:
			j := i
			for j < len(rel) && rel[j] != '.' && rel[j] != '[' {
				j++
			}
			keys = append(keys, rel[i:j])
			i = j
		}
	}
	return keys, nil
}

// DecodeRGD decodes one ResourceGraphDefinition from its JSON (an object
// as read from a YAML stream).
func DecodeRGD(raw []byte) (*krov1a1.ResourceGraphDefinition, error) {
	var r krov1a1.ResourceGraphDefinition
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// InstanceFinalizer is the finalizer the runtime keeps on each instance
// of a running RGD until none of its resources remain (kro's name, the
// same as its RGD finalizer), so that the deletion order is seen through.
const InstanceFinalizer = "kro.run/finalizer"
