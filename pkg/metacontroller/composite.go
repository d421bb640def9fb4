package metacontroller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// ControllerUIDLabel is the label that selects the children of a parent
// under generateSelector: controller-uid=<parent uid>.
const ControllerUIDLabel = "controller-uid"

// compositeFinalizerPrefix + controller name is the finalizer a
// CompositeController with a finalize hook puts on its parents.
const compositeFinalizerPrefix = "metacontroller.io/compositecontroller-"

var controllerRevisionGVK = mcv1a1.GroupVersion.WithKind("ControllerRevision")

// composite runs one CompositeController.
type composite struct {
	*engine
	cc        *mcv1a1.CompositeController
	parent    resource
	children  []*childRule
	byGVK     map[schema.GroupVersionKind]*childRule
	related   *related
	parents   *watch
	childW    map[schema.GroupVersionKind]*watch
	revisions *watch
	parentSel labels.Selector
	finalizer string
	generate  bool
	ignoreSt  bool
	rolling   bool
	fields    []string
	// draining: the CompositeController is being deleted (drain).
	draining atomic.Bool
}

// startComposite validates cc, starts its watches and workers. Errors
// carry the spec path.
func startComposite(ctx context.Context, d deps, cc *mcv1a1.CompositeController) (*composite, error) {
	c, err := newComposite(d, cc)
	if err != nil {
		return nil, err
	}
	// Watches: parents, each child kind, revisions.
	if c.parents, err = c.watch(ctx, "spec.parentResource", c.parent.gvk, c.onParent); err != nil {
		c.stop()
		return nil, err
	}
	revPath := ""
	for _, rule := range c.children {
		w, err := c.watch(ctx, rule.path, rule.gvk, c.onChild)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.childW[rule.gvk] = w
		if rule.rolling() && revPath == "" {
			revPath = rule.path + ".updateStrategy"
		}
	}
	if c.rolling {
		if c.revisions, err = c.watch(ctx, revPath, controllerRevisionGVK, c.onChild); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		c.stop()
		return nil, err
	}
	if p := c.cc.Spec.ResyncPeriodSeconds; p != nil && *p > 0 {
		c.every(time.Duration(*p)*time.Second, func() {
			for _, o := range c.parents.index.list("", true) {
				c.enqueueForced(c.keyOf(o))
			}
		})
	}
	c.log.Info("compositecontroller started", "parent", c.parent.gvk.String(), "children", len(c.children))
	return c, nil
}

// newComposite validates cc and resolves its resources and hooks, without
// watching anything (startComposite starts the watches; Render syncs
// offline). Errors carry the spec path.
func newComposite(d deps, cc *mcv1a1.CompositeController) (*composite, error) {
	name := "compositecontroller/" + cc.Name
	d.log = d.log.WithValues("compositecontroller", cc.Name)
	c := &composite{engine: newEngine(d, name), cc: cc.DeepCopy(), byGVK: map[schema.GroupVersionKind]*childRule{},
		childW: map[schema.GroupVersionKind]*watch{}, finalizer: compositeFinalizerPrefix + cc.Name}
	c.engine.sync = c.syncParent
	spec := &c.cc.Spec
	var err error
	if c.followUp, err = followUpOf(cc); err != nil {
		return nil, err
	}
	if _, err = cleanupTimeoutOf(cc); err != nil {
		return nil, err
	}
	if c.parent, err = d.resolve(spec.ParentResource.APIVersion, spec.ParentResource.Resource, "spec.parentResource"); err != nil {
		return nil, err
	}
	if c.parentSel, err = selectorOf(spec.ParentResource.LabelSelector, "spec.parentResource.labelSelector"); err != nil {
		return nil, err
	}
	c.generate = spec.GenerateSelector != nil && *spec.GenerateSelector
	c.ignoreSt = spec.ParentResource.IgnoreStatusChanges != nil && *spec.ParentResource.IgnoreStatusChanges
	c.fields = []string{"spec"}
	if rh := spec.ParentResource.RevisionHistory; rh != nil && len(rh.FieldPaths) > 0 {
		c.fields = rh.FieldPaths
	}
	for i, cr := range spec.ChildResources {
		path := fmt.Sprintf("spec.childResources[%d]", i)
		res, err := d.resolve(cr.APIVersion, cr.Resource, path)
		if err != nil {
			return nil, err
		}
		if c.byGVK[res.gvk] != nil {
			return nil, fmt.Errorf("%s: %s is declared twice", path, res.gvk)
		}
		if !res.namespaced && c.parent.namespaced {
			return nil, fmt.Errorf("%s: a namespaced parent cannot own the cluster-scoped %s", path, res.gvk.Kind)
		}
		rule := &childRule{resource: res, method: mcv1a1.ChildUpdateOnDelete, path: path}
		if us := cr.UpdateStrategy; us != nil {
			if us.Method != "" {
				rule.method = us.Method
			}
			rule.checks = us.StatusChecks.Conditions
		}
		if rule.rolling() {
			if !c.parent.namespaced {
				return nil, fmt.Errorf("%s.updateStrategy.method: rolling updates need a namespaced parent (ControllerRevisions live in its namespace)", path)
			}
			c.rolling = true
		}
		c.children = append(c.children, rule)
		c.byGVK[res.gvk] = rule
	}
	var sync, fin, cust *mcv1a1.Hook
	if h := spec.Hooks; h != nil {
		sync, fin, cust = h.Sync, h.Finalize, h.Customize
	}
	customize, err := c.setHooks(sync, fin, cust, spec.EndpointConfigs)
	if err != nil {
		return nil, err
	}
	c.related = newRelated(c.engine, customize, c.cc)
	return c, nil
}

func (c *composite) keyOf(o *unstructured.Unstructured) parentKey {
	return parentKey{gvk: c.parent.gvk, NamespacedName: keyOf(o)}
}

func onlyStatusChanged(old, obj *unstructured.Unstructured) bool {
	if old.GetGeneration() != obj.GetGeneration() || old.GetGeneration() == 0 {
		return false
	}
	a, b := runtime.DeepCopyJSON(old.Object), runtime.DeepCopyJSON(obj.Object)
	for _, m := range []map[string]any{a, b} {
		delete(m, "status")
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "resourceVersion")
			delete(md, "managedFields")
		}
	}
	return apply.Equal(a, b)
}

func (c *composite) onParent(old, obj *unstructured.Unstructured) {
	if obj == nil {
		c.dropState(c.keyOf(old))
		return
	}
	if old != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		return
	}
	pk := c.keyOf(obj)
	if v := c.log.V(3); v.Enabled() {
		v.Info("parent event", "parent", pk.String(), "resourceVersion", obj.GetResourceVersion())
	}
	switch c.exp.observe(pk, obj, false) {
	case ignore:
		return
	case changed:
		if c.ignoreSt && old != nil && onlyStatusChanged(old, obj) {
			return
		}
	}
	c.enqueue(pk)
}

// ownerKey returns the parent key of a controller reference of o that
// points to this controller's parent kind.
func (c *composite) ownerKey(o *unstructured.Unstructured) (parentKey, bool) {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != c.parent.gvk.Kind {
		return parentKey{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != c.parent.gvk.Group {
		return parentKey{}, false
	}
	pk := parentKey{gvk: c.parent.gvk}
	pk.Name = ref.Name
	if c.parent.namespaced {
		pk.Namespace = o.GetNamespace()
	}
	return pk, true
}

func (c *composite) onChild(old, obj *unstructured.Unstructured) {
	cur, deleted := obj, obj == nil
	if cur == nil {
		cur = old
	}
	if old != nil && obj != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		return
	}
	if v := c.log.V(3); v.Enabled() {
		v.Info("child event", "kind", cur.GetKind(), "child", describe(cur), "resourceVersion", cur.GetResourceVersion(), "deleted", deleted)
	}
	seen := map[parentKey]bool{}
	for _, o := range []*unstructured.Unstructured{old, obj} {
		if o == nil {
			continue
		}
		if pk, ok := c.ownerKey(o); ok && !seen[pk] {
			seen[pk] = true
			c.observed(pk, cur, deleted)
		}
	}
	// An orphan (new, or whose labels changed) may be adopted by the
	// parents whose selector matches it.
	if obj == nil || metav1.GetControllerOf(obj) != nil || cur.GroupVersionKind() == controllerRevisionGVK {
		return
	}
	if old != nil && metav1.GetControllerOf(old) == nil && labels.Equals(old.GetLabels(), obj.GetLabels()) {
		return
	}
	ns, all := obj.GetNamespace(), !c.parent.namespaced
	for _, p := range c.parents.index.list(ns, all) {
		if p.GetDeletionTimestamp() != nil || !c.parentSel.Matches(labels.Set(p.GetLabels())) {
			continue
		}
		if sel, err := c.selector(p); err == nil && sel.Matches(labels.Set(obj.GetLabels())) {
			c.enqueue(c.keyOf(p))
		}
	}
}

// selector returns the selector of a parent's children: controller-uid
// under generateSelector, spec.selector otherwise.
func (c *composite) selector(parent *unstructured.Unstructured) (labels.Selector, error) {
	if c.generate {
		return labels.SelectorFromSet(labels.Set{ControllerUIDLabel: string(parent.GetUID())}), nil
	}
	raw, found, err := unstructured.NestedMap(parent.Object, "spec", "selector")
	if err != nil || !found {
		return nil, errors.New("spec.selector: the parent has no label selector (set spec.selector or the controller's generateSelector)")
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		// It would select, adopt and (not being desired) delete every
		// object of the child kinds in reach.
		return nil, errors.New("spec.selector: an empty selector matches every object; set matchLabels, matchExpressions or both (or the controller's generateSelector)")
	}
	return selectorOf(&ls, "spec.selector")
}

// claim returns the children of one kind that parent owns, adopting
// matching orphans and releasing owned children that stopped matching
// (ControllerRef rules).
func (c *composite) claim(ctx context.Context, parent *unstructured.Unstructured, sel labels.Selector, rule *childRule, w writes) ([]*unstructured.Unstructured, error) {
	idx := c.childW[rule.gvk].index
	var out []*unstructured.Unstructured
	for _, o := range idx.owned(parent.GetUID()) {
		if c.parent.namespaced && o.GetNamespace() != parent.GetNamespace() {
			continue
		}
		if o.GetDeletionTimestamp() != nil || sel.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
			continue
		}
		if err := c.release(ctx, parent, o, w); err != nil {
			return nil, err
		}
	}
	if parent.GetDeletionTimestamp() != nil || !c.parentSel.Matches(labels.Set(parent.GetLabels())) {
		// Finalizing parents adopt nothing.
		return out, nil
	}
	for _, o := range idx.orphanList(parent.GetNamespace(), !c.parent.namespaced) {
		if o.GetDeletionTimestamp() != nil || !sel.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		adopted, err := c.adopt(ctx, parent, o, w)
		if err != nil {
			return nil, err
		}
		out = append(out, adopted)
	}
	sort.Slice(out, func(i, j int) bool { return describe(out[i]) < describe(out[j]) })
	return out, nil
}

func (c *composite) syncParent(ctx context.Context, pk parentKey) error {
	parent := c.parents.index.get(pk.NamespacedName)
	if parent == nil {
		c.dropState(pk)
		return nil
	}
	release, ours := c.ownParent(parent)
	if !ours {
		// Another member of the ring works this parent.
		c.dropState(pk)
		return nil
	}
	defer release()
	c.counters.synced()
	if c.exp.pending(pk) {
		c.log.V(2).Info("sync skipped: awaiting the events of our writes", "parent", pk.String())
		syncsTotal.WithLabelValues(c.name, "skipped").Inc()
		return nil
	}
	w := writes{}
	followUp, after := false, time.Duration(0)
	done := c.track(pk)
	defer func() { done(w, followUp, after) }()

	deleting := parent.GetDeletionTimestamp() != nil
	matches := c.parentSel.Matches(labels.Set(parent.GetLabels()))
	hasFin := slices.Contains(parent.GetFinalizers(), c.finalizer)
	// A parent that stopped matching parentResource.labelSelector is
	// finalized like a deleted one when it carries our finalizer
	// (Metacontroller does the same).
	finalizing := (deleting || !matches) && hasFin && c.finHook != nil
	var err error
	switch {
	case finalizing:
	case !matches && !hasFin:
		return nil
	case deleting || !matches || c.draining.Load():
		// Deleted or opted out without a finalize hook (the garbage
		// collector deletes the children; a finalizer left from an earlier
		// spec must not block the deletion), or the controller is being
		// deleted: the finalizer goes without a call.
		if hasFin {
			if _, err = c.setFinalizer(ctx, parent, c.finalizer, false, w); err == nil && c.draining.Load() {
				c.released(parent, "CompositeController", c.cc.Name)
			}
		}
		return err
	case c.finHook != nil:
		if parent, err = c.setFinalizer(ctx, parent, c.finalizer, true, w); err != nil {
			return err
		}
	case hasFin:
		// The finalize hook was removed from the controller.
		if parent, err = c.setFinalizer(ctx, parent, c.finalizer, false, w); err != nil {
			return err
		}
	}
	if !finalizing && c.syncHook == nil {
		// Only a finalize hook: live parents get the finalizer, no call.
		return nil
	}

	sel, err := c.selector(parent)
	if err != nil {
		return c.hookFailed(ctx, pk, parent, w, "Sync", &hook.Error{Hook: "parent", Reason: ReasonInvalidParent, Err: err})
	}
	observed := childSet{}
	var observedList [][]*unstructured.Unstructured
	for _, rule := range c.children {
		kids, err := c.claim(ctx, parent, sel, rule, w)
		if err != nil {
			followUp = true
			return err
		}
		observedList = append(observedList, kids)
		for _, k := range kids {
			observed.put(k)
		}
	}
	rules, err := c.related.rules(ctx, pk, parent)
	if err != nil {
		if hook.ReasonOf(err) != "" {
			return c.hookFailed(ctx, pk, parent, w, "Customize", err)
		}
		return err
	}
	caller, version, hookName := c.forPhase(finalizing)
	relatedMap, relatedList, err := c.related.objects(rules, version, parent.GetNamespace())
	if err != nil {
		return err
	}
	var revs []*unstructured.Unstructured
	if c.rolling {
		revs = c.revisions.index.owned(parent.GetUID())
	}
	fp := fingerprint(fmt.Sprintf("finalizing=%v", finalizing), []*unstructured.Unstructured{parent}, slices.Concat(observedList...), relatedList, revs)
	st, skip := c.upToDate(pk, fp, w)
	if skip {
		return nil
	}

	resp, err := c.call(ctx, caller, parent, observed, relatedMap, version, finalizing)
	if err != nil {
		return c.hookFailed(ctx, pk, parent, w, hookName, err)
	}
	desired, err := c.desiredChildren(parent, sel, resp, hookName)
	if err != nil {
		return c.hookFailed(ctx, pk, parent, w, hookName, err)
	}

	var errs, parentErrs []error
	if c.rolling && !finalizing {
		errs = append(errs, c.syncRolling(ctx, parent, observed, desired, resp, relatedMap, w)...)
	} else {
		errs = append(errs, c.manage(ctx, parent, c.children, observed, desired, w)...)
	}
	// The status of every answer is written, after its children, as
	// Metacontroller does: the next request (the follow-up that sends the
	// hook the children it asked for, too) carries it, so a hook that
	// records there what it did (the id of an external object it created)
	// sees it. observedGeneration goes with the hook's status; a null
	// status (left alone, at most our condition changes) keeps the one
	// there is.
	cur, err := c.writeStatus(ctx, parent, resultStatus(parent, resp.Status, errs), resp.Status != nil, w)
	if err != nil {
		parentErrs = append(parentErrs, err)
		c.statusRefused(ctx, parent, err, w)
	}
	if finalizing && resp.Finalized && len(errs)+len(parentErrs) == 0 {
		if _, err := c.setFinalizer(ctx, cur, c.finalizer, false, w); err != nil {
			parentErrs = append(parentErrs, err)
		}
	}
	if resp.ResyncAfterSeconds > 0 {
		c.resyncAfter(pk, resyncDuration(resp.ResyncAfterSeconds))
	}
	followUp = len(w) > 0 && !(c.ignoreSt && len(w) == 1 && hasRef(w, parent)) && (c.followUp || finalizing || c.rolling)
	followUp, after = c.settleFollowUp(pk, parent, w, followUp, len(errs)+len(parentErrs) > 0)
	c.log.V(1).Info("synced", "parent", pk.String(), "hook", hookName, "writes", len(w), "errors", len(errs))
	if len(errs)+len(parentErrs) > 0 {
		// Not fingerprinted: the retry must apply the same desired state
		// again. The API server's refusal is reported on the parent.
		return c.writeFailed(pk, parent, hookName, errs, parentErrs)
	}
	c.synced(st, fp)
	return nil
}

func hasRef(w writes, o *unstructured.Unstructured) bool {
	_, ok := w[refOf(o)]
	return ok
}

// lower turns a hook name ("Sync") into its spec field ("sync").
func lower(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// desiredChildren validates the children of a sync or finalize response
// (hookName "Sync" or "Finalize") for parent, whose children selector is
// sel: each must be a declared child kind in the parent's scope and, unless
// the controller generates the selector, match sel; with generateSelector
// each gets the ControllerUIDLabel of the parent. Errors are hook errors of
// reason InvalidResponse naming spec.hooks.<hook> and the response entry.
func (c *composite) desiredChildren(parent *unstructured.Unstructured, sel labels.Selector, resp *hookapi.CompositeResponse, hookName string) (childSet, error) {
	desired, err := parseDesired(parent, c.parent.namespaced, c.byGVK, resp.Children, "children")
	if err != nil {
		return nil, invalidResponse("spec.hooks."+lower(hookName), err)
	}
	if !c.generate {
		// In the response's order, for the index (parseDesired checked
		// the shape of every entry).
		for i, raw := range resp.Children {
			d := &unstructured.Unstructured{Object: raw}
			if !sel.Matches(labels.Set(d.GetLabels())) {
				return nil, invalidResponse("spec.hooks."+lower(hookName),
					fmt.Errorf("children[%d] (%s %s): labels %v do not match the parent's selector %s", i, d.GetKind(), d.GetName(), d.GetLabels(), sel))
			}
		}
		return desired, nil
	}
	for _, d := range desired.list() {
		lbl := d.GetLabels()
		if lbl == nil {
			lbl = map[string]string{}
		}
		lbl[ControllerUIDLabel] = string(parent.GetUID())
		d.SetLabels(lbl)
	}
	return desired, nil
}

// request is the sync or finalize request for parent with its observed
// children (every declared child kind present, empty or not) and related
// objects, keyed for the hook's contract version.
func (c *composite) request(parent *unstructured.Unstructured, observed childSet, related hookapi.ObjectMap, version mcv1a1.HookVersion, finalizing bool) *hookapi.CompositeRequest {
	req := &hookapi.CompositeRequest{Controller: c.cc, Parent: parent, Children: hookapi.ObjectMap{}, Related: related, Finalizing: finalizing}
	for _, rule := range c.children {
		req.Children.Init(rule.gvk)
		for _, o := range observed[rule.gvk] {
			req.Children.Insert(version, parent.GetNamespace(), o)
		}
	}
	if req.Related == nil {
		req.Related = hookapi.ObjectMap{}
	}
	return req
}

// call sends a sync or finalize request for parent.
func (c *composite) call(ctx context.Context, caller hook.Caller, parent *unstructured.Unstructured, observed childSet, related hookapi.ObjectMap, version mcv1a1.HookVersion, finalizing bool) (*hookapi.CompositeResponse, error) {
	req := c.request(parent, observed, related, version, finalizing)
	resp := &hookapi.CompositeResponse{}
	if err := caller.Call(ctx, string(parent.GetUID()), req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// maxParallelWrites bounds the child writes of one sync that run at once.
const maxParallelWrites = 8

// manage converges the children of the given rules: desired children are
// created or updated (per update method), observed children that are not
// desired are deleted. The writes of one sync run in parallel (at most
// maxParallelWrites at a time).
func (c *engine) manage(ctx context.Context, parent *unstructured.Unstructured, rules []*childRule, observed, desired childSet, w writes) []error {
	var ops []func(w writes) error
	for _, rule := range rules {
		for k, o := range observed[rule.gvk] {
			if desired.get(rule.gvk, k) == nil {
				ops = append(ops, func(w writes) error { return c.deleteChild(ctx, o, w) })
			}
		}
		for k, d := range desired[rule.gvk] {
			obs, method := observed.get(rule.gvk, k), rule.method
			ops = append(ops, func(w writes) error { return c.applyChild(ctx, parent, obs, d, method, w) })
		}
	}
	return runParallel(ops, w)
}

// runParallel runs ops with at most maxParallelWrites at a time and merges
// their writes into w.
func runParallel(ops []func(w writes) error, w writes) []error {
	if len(ops) == 1 {
		if err := ops[0](w); err != nil {
			return []error{err}
		}
		return nil
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, maxParallelWrites)
	)
	for _, op := range ops {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			own := writes{}
			err := op(own)
			mu.Lock()
			defer mu.Unlock()
			for k, v := range own {
				w[k] = v
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	// In a stable order: the errors end up in a status condition, which
	// must not change when the same writes fail again.
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}
