package diff

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	difflib "github.com/pmezard/go-difflib/difflib"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/expression"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// DefaultMaxObjects bounds the objects Run lists when Options.MaxObjects
// is 0.
const DefaultMaxObjects = 200000

// listPage is the page size of Run's lists (the limit parameter).
const listPage = 500

// Options configure Run.
type Options struct {
	// Config reaches the cluster (as client-go loads a kubeconfig).
	Config *rest.Config
	// Operators are the operators to preview, as they would be applied.
	Operators []*opv1a1.Operator
	// Files, when set, maps an operator's name to the file it was read
	// from; an operator's compile errors then start with it.
	Files map[string]string
	// MaxDeltaEntries, MaxObjectBytes and EvalLimits are the manager's
	// limits (operator.RuntimeOptions), applied as the manager applies them.
	MaxDeltaEntries int
	MaxObjectBytes  int
	EvalLimits      expression.Limits
	// RGDs are ResourceGraphDefinitions to preview with the Operators.
	// Each is compiled as the RGD runtime compiles the RGD of that name in
	// the cluster (with its uid; its Operator replaces one of the same
	// name in Operators), its instance CRD is previewed as the runtime
	// applies it, and an instance kind the cluster does not serve yet has
	// no objects.
	RGDs []*krov1a1.ResourceGraphDefinition
	// KindLimits bound the kinds of one operator as the manager bounds
	// them (dctl --max-targets, --max-view-kinds): a controller over them
	// does not run, and its error is in Result.Errors.
	KindLimits controller.KindLimits
	// MaxObjects bounds the objects listed over all kinds
	// (DefaultMaxObjects if 0); more is an error.
	MaxObjects int
	Logger     logr.Logger
}

// Action is what applying the operators would do to one object.
type Action string

const (
	Create Action = "create"
	Update Action = "update"
	Delete Action = "delete"
)

// Change is one target object applying the operators would change. Live
// and Merged are the object as listed and as the API server's dry-run
// answers leave it (nil for an object that does not exist before or
// after), without the fields the API server manages (Compared).
type Change struct {
	Action Action
	GVK    schema.GroupVersionKind
	Key    object.Key
	Live   map[string]any
	Merged map[string]any
}

// Name is the object's name in a diff, as kubectl diff names it:
// "<group>.<version>.<Kind>.<namespace>.<name>" (no group for the core
// group, an empty namespace for a cluster-scoped object).
func (c Change) Name() string {
	g := ""
	if c.GVK.Group != "" {
		g = c.GVK.Group + "."
	}
	return fmt.Sprintf("%s%s.%s.%s.%s", g, c.GVK.Version, c.GVK.Kind, c.Key.Namespace, c.Key.Name)
}

// Result is what Run found.
type Result struct {
	// Changes are sorted by apiVersion, kind, namespace and name.
	Changes []Change
	// Conflicts are target objects the controllers would leave alone
	// because another controller owns them (the manager's OwnerConflict).
	Conflicts []operator.OfflineConflict
	// Errors are the errors the controllers would report (limits, the
	// API server refusing a dry-run write, ...), one per leaf.
	Errors []error
	// Listed is the number of objects listed; DryRuns the number of
	// dry-run requests sent.
	Listed, DryRuns int
}

// Run previews what applying opts.Operators would change in the cluster
// of opts.Config; it writes nothing. Requests sent: discovery, one paged
// list (GET, limit 500) per kind that a controller reads or writes (views
// are not listed: they are computed), a GET of each other Operator an
// owner annotation on a target object names (ownerLive), and, for each
// write the controllers would make, its dry-run request (dryRun=All, see
// dryRunClient), which the API server validates and answers without
// persisting anything. No watch or informer is started.
//
// The error is one of: the cluster cannot be reached or listed, an
// operator does not compile (the error names the operator's file when
// Files has it, the operator and the spec path), or more than MaxObjects
// objects. Errors the controllers would report while running are in
// Result.Errors.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if opts.MaxObjects == 0 {
		opts.MaxObjects = DefaultMaxObjects
	}
	log := opts.Logger
	c, versions, status, err := connect(opts.Config, log)
	if err != nil {
		return nil, err
	}
	crds, err := c.compileRGDs(ctx, &opts)
	if err != nil {
		return nil, err
	}
	rgdVersions, rgdStatus := rgdKinds(crds)
	for k, v := range rgdVersions {
		if _, ok := versions[k]; !ok {
			versions[k] = v
		}
	}
	for k := range rgdStatus {
		status[k] = true
	}
	offOpts := operator.OfflineOptions{Versions: versions, Logger: log,
		MaxDeltaEntries: opts.MaxDeltaEntries, MaxObjectBytes: opts.MaxObjectBytes, EvalLimits: opts.EvalLimits,
		StatusSubresource: func(gvk schema.GroupVersionKind) bool { return status[gvk] }}

	res := &Result{}
	// A controller over the kind limits does not run (the manager reports
	// it in the operator's status).
	ops := make([]*opv1a1.Operator, 0, len(opts.Operators))
	for _, op := range opts.Operators {
		over := controller.KindLimitErrors(op.Name, op.Spec.Controllers, opts.KindLimits)
		if len(over) == 0 {
			ops = append(ops, op)
			continue
		}
		cp := op.DeepCopy()
		cp.Spec.Controllers = nil
		for i, c := range op.Spec.Controllers {
			if err := over[i]; err != nil {
				res.Errors = append(res.Errors, fmt.Errorf("operator %q: %w", op.Name, err))
				continue
			}
			cp.Spec.Controllers = append(cp.Spec.Controllers, c)
		}
		if len(cp.Spec.Controllers) > 0 {
			ops = append(ops, cp)
		}
	}
	opts.Operators = ops

	// Compile each operator on its own first, so an error names its file.
	for _, op := range opts.Operators {
		probe, err := operator.NewOffline([]*opv1a1.Operator{op}, offOpts)
		if err != nil {
			if f := opts.Files[op.Name]; f != "" {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			return nil, err
		}
		probe.Stop()
	}
	probe, err := operator.NewOffline(opts.Operators, offOpts)
	if err != nil {
		return nil, err
	}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, gvk := range append(probe.SourceKinds(), probe.TargetKinds()...) {
		if !isView(gvk) {
			kinds[gvk] = true
		}
	}
	targets := probe.TargetKinds()
	probe.Stop()

	store := view.NewStore()
	defer store.Close() // its history timer would keep it for HistoryAge
	for _, gvk := range sortedKinds(kinds) {
		if _, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) && rgdVersions[gvk.Group+"/"+gvk.Kind] != "" {
			// An RGD's instance kind whose CRD is not applied yet: no
			// instances.
			continue
		}
		objs, err := c.list(ctx, gvk, opts.MaxObjects-res.Listed)
		if err != nil {
			return nil, err
		}
		res.Listed += len(objs)
		for _, u := range objs {
			u.SetGroupVersionKind(gvk)
			c.live[objectID{gvk, object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}}] = u
			if _, err := store.Create(u.DeepCopy()); err != nil {
				return nil, fmt.Errorf("%s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
			}
		}
	}
	log.V(1).Info("listed", "objects", res.Listed, "kinds", len(kinds))

	offOpts.Store = store
	offOpts.OwnerLive = c.ownerLive(ctx, opts.Operators)
	offOpts.ResyncLast = true
	offOpts.WrapClient = func(sc controller.StoreClient) controller.Client { return dryRunClient{store: sc, c: c} }
	off, err := operator.NewOffline(opts.Operators, offOpts)
	if err != nil {
		return nil, err
	}
	runErr := off.Start(ctx)
	off.Stop()
	for _, e := range leafErrors(runErr) {
		res.Errors = append(res.Errors, e)
	}
	res.Conflicts = off.Conflicts()

	for _, rc := range crds {
		ch, err := c.crdChange(ctx, rc)
		if err != nil {
			res.Errors = append(res.Errors, err)
		} else if ch != nil {
			res.Changes = append(res.Changes, *ch)
		}
	}
	res.DryRuns = c.dryRuns
	for _, gvk := range targets {
		if isView(gvk) {
			continue
		}
		keys := map[object.Key]bool{}
		for id := range c.live {
			if id.gvk == gvk {
				keys[id.key] = true
			}
		}
		for _, u := range store.List(gvk) {
			keys[object.Key{Namespace: u.GetNamespace(), Name: u.GetName()}] = true
		}
		for _, k := range sortedKeys(keys) {
			var before, after map[string]any
			if l := c.liveOf(gvk, k); l != nil {
				before = Compared(l.Object)
			}
			if u, err := store.Get(gvk, k); err == nil {
				after = Compared(u.Object)
			}
			ch := Change{GVK: gvk, Key: k, Live: before, Merged: after}
			switch {
			case before == nil && after != nil:
				ch.Action = Create
			case before != nil && after == nil:
				ch.Action = Delete
			case before != nil && !object.Equal(before, after):
				ch.Action = Update
			default:
				continue
			}
			res.Changes = append(res.Changes, ch)
		}
	}
	sortChanges(res.Changes)
	return res, nil
}

// sortChanges sorts changes by apiVersion, kind, namespace and name.
func sortChanges(changes []Change) {
	sort.Slice(changes, func(i, j int) bool {
		a, b := changes[i], changes[j]
		if x, y := a.GVK.GroupVersion().String(), b.GVK.GroupVersion().String(); x != y {
			return x < y
		}
		if a.GVK.Kind != b.GVK.Kind {
			return a.GVK.Kind < b.GVK.Kind
		}
		return a.Key.String() < b.Key.String()
	})
}

// Compared returns doc as Run compares and prints it: a copy without the
// metadata the API server manages (object.ServerFields: resourceVersion,
// uid, creationTimestamp, generation, managedFields, ...) and without an
// empty status (the API server's initial status of a new object).
func Compared(doc map[string]any) map[string]any {
	out := object.StripServerFields(doc)
	if st, ok := out["status"].(map[string]any); ok && len(st) == 0 {
		delete(out, "status")
	}
	return out
}

// connect discovers the API of the cluster of cfg: the cluster (its
// dynamic client and REST mapper), the preferred version of each
// "group/Kind" and the kinds served with the status subresource.
func connect(cfg *rest.Config, log logr.Logger) (*cluster, map[string]string, map[schema.GroupVersionKind]bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil && len(groups) == 0 {
		return nil, nil, nil, fmt.Errorf("cannot reach the cluster at %s: %w", cfg.Host, err)
	}
	if err != nil {
		// Some groups failed discovery (an aggregated API down): the
		// others are usable, as for kubectl.
		log.Info("discovery incomplete", "error", err.Error())
	}
	versions, status := kindsOf(groups)
	c := &cluster{dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups), live: map[objectID]*unstructured.Unstructured{}}
	return c, versions, status, nil
}

// ownerLive returns the manager's rule for whether the controller an
// owner annotation value ("<operator>/<controller>", or
// "<operator>/<controller>/<target>") names runs once ops are applied: an
// operator of ops runs its controllers; another one runs as long as its
// Operator object exists, is not being deleted and has the controller
// (read from the API server once per operator; an error other than
// NotFound counts as running, so nothing is taken over on a doubt).
func (c *cluster) ownerLive(ctx context.Context, ops []*opv1a1.Operator) func(string) bool {
	running := map[string]map[string]bool{}
	for _, op := range ops {
		names := map[string]bool{}
		for _, ctl := range op.Spec.Controllers {
			names[ctl.Name] = true
		}
		running[op.Name] = names
	}
	type found struct {
		obj *unstructured.Unstructured
		err error
	}
	seen := map[string]found{}
	return func(owner string) bool {
		op, ctrl, ok := strings.Cut(owner, "/")
		if !ok {
			return false
		}
		short := ctrl
		if i := strings.LastIndex(ctrl, "/"); i >= 0 {
			short = ctrl[:i]
		}
		if names, ok := running[op]; ok {
			return names[ctrl] || names[short]
		}
		f, ok := seen[op]
		if !ok {
			ri, err := c.resource(opv1a1.GroupVersion.WithKind("Operator"), "")
			if err == nil {
				f.obj, f.err = ri.Get(ctx, op, metav1.GetOptions{})
			} else {
				f.err = err
			}
			seen[op] = f
		}
		if f.err != nil {
			return !(apierrors.IsNotFound(f.err) || meta.IsNoMatchError(f.err))
		}
		if f.obj.GetDeletionTimestamp() != nil {
			return false
		}
		ctls, _, _ := unstructured.NestedSlice(f.obj.Object, "spec", "controllers")
		for _, x := range ctls {
			if m, ok := x.(map[string]any); ok && (m["name"] == ctrl || m["name"] == short) {
				return true
			}
		}
		return false
	}
}

// kindsOf returns, from discovery, the preferred version of each
// "group/Kind" (operator.OfflineOptions.Versions) and the kinds served
// with the status subresource.
func kindsOf(groups []*restmapper.APIGroupResources) (map[string]string, map[schema.GroupVersionKind]bool) {
	versions := map[string]string{}
	status := map[schema.GroupVersionKind]bool{}
	for _, g := range groups {
		for v, rs := range g.VersionedResources {
			kinds := map[string]string{} // resource -> kind
			for _, r := range rs {
				if !strings.Contains(r.Name, "/") {
					kinds[r.Name] = r.Kind
				}
			}
			for _, r := range rs {
				if base, sub, ok := strings.Cut(r.Name, "/"); ok && sub == "status" && kinds[base] != "" {
					status[schema.GroupVersionKind{Group: g.Group.Name, Version: v, Kind: kinds[base]}] = true
				}
				if !strings.Contains(r.Name, "/") && v == g.Group.PreferredVersion.Version {
					versions[g.Group.Name+"/"+r.Kind] = v
				}
			}
		}
	}
	return versions, status
}

// list lists every object of gvk in pages; more than max objects is an
// error.
func (c *cluster) list(ctx context.Context, gvk schema.GroupVersionKind, max int) ([]*unstructured.Unstructured, error) {
	ri, err := c.resource(gvk, metav1.NamespaceAll)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	var out []*unstructured.Unstructured
	cont := ""
	for {
		l, err := ri.List(ctx, metav1.ListOptions{Limit: listPage, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.GroupVersion().WithKind(gvk.Kind), err)
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if len(out) > max {
			return nil, fmt.Errorf("list %s: more objects than the %d that may still be listed (limit of objects listed over all kinds, --max-objects)", gvk.Kind, max)
		}
		if cont = l.GetContinue(); cont == "" {
			return out, nil
		}
	}
}

// WriteUnified writes the changes as `kubectl diff` does, one
// `diff -u -N live/NAME merged/NAME` section per object (NAME from
// Change.Name), each object as YAML with its keys sorted, and unified
// hunks of 3 lines of context; a created object's live side and a
// deleted object's merged side are empty.
func (r *Result) WriteUnified(w io.Writer) error {
	for _, ch := range r.Changes {
		a, err := yamlLines(ch.Live)
		if err != nil {
			return err
		}
		b, err := yamlLines(ch.Merged)
		if err != nil {
			return err
		}
		live, merged := "live/"+ch.Name(), "merged/"+ch.Name()
		if _, err := fmt.Fprintf(w, "diff -u -N %s %s\n", live, merged); err != nil {
			return err
		}
		if err := difflib.WriteUnifiedDiff(w, difflib.UnifiedDiff{A: a, B: b, FromFile: live, ToFile: merged, Context: 3}); err != nil {
			return err
		}
	}
	return nil
}

// yamlLines renders doc as YAML lines, each with its newline; none for nil.
func yamlLines(doc map[string]any) ([]string, error) {
	if doc == nil {
		return nil, nil
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return difflib.SplitLines(strings.TrimSuffix(string(b), "\n")), nil
}

func sortedKinds(m map[schema.GroupVersionKind]bool) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(m))
	for g := range m {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func sortedKeys(m map[object.Key]bool) []object.Key {
	out := make([]object.Key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// leafErrors returns the errors joined in err (errors.Join, nested), one
// by one.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}
