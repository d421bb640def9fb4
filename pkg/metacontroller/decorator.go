package metacontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// DecoratorAnnotation marks the attachments of a DecoratorController with
// its name, so that several decorators can attach objects of the same kind
// to one object.
const DecoratorAnnotation = "metacontroller.k8s.io/decorator-controller"

// decoratorFinalizerPrefix + controller name is the finalizer a
// DecoratorController with a finalize hook puts on decorated objects.
const decoratorFinalizerPrefix = "metacontroller.io/decoratorcontroller-"

// decorated is a resolved resource rule of a DecoratorController.
type decorated struct {
	resource
	labels   labels.Selector
	anns     labels.Selector
	ignoreSt bool
	w        *watch
}

func (d *decorated) matches(o *unstructured.Unstructured) bool {
	return d.labels.Matches(labels.Set(o.GetLabels())) && d.anns.Matches(labels.Set(o.GetAnnotations()))
}

// decorator runs one DecoratorController.
type decorator struct {
	*engine
	dc        *mcv1a1.DecoratorController
	resources []*decorated
	byGVK     map[schema.GroupVersionKind]*decorated
	attach    []*childRule
	attByGVK  map[schema.GroupVersionKind]*childRule
	attW      map[schema.GroupVersionKind]*watch
	related   *related
	finalizer string
	// draining: the DecoratorController is being deleted (drain).
	draining atomic.Bool
}

// annotationSelector converts an annotationSelector (label selector
// semantics over annotations); nil means everything.
func annotationSelector(s *mcv1a1.AnnotationSelector, path string) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return selectorOf(&metav1.LabelSelector{MatchLabels: s.MatchAnnotations, MatchExpressions: s.MatchExpressions}, path)
}

// startDecorator validates dc, starts its watches and workers.
func startDecorator(ctx context.Context, d deps, dc *mcv1a1.DecoratorController) (*decorator, error) {
	c, err := newDecorator(d, dc)
	if err != nil {
		return nil, err
	}
	spec := &c.dc.Spec
	for i, dr := range c.resources {
		dr := dr
		if dr.w, err = c.watch(ctx, fmt.Sprintf("spec.resources[%d]", i), dr.gvk, func(old, obj *unstructured.Unstructured) { c.onObject(dr, old, obj) }); err != nil {
			c.stop()
			return nil, err
		}
	}
	for _, rule := range c.attach {
		w, err := c.watch(ctx, rule.path, rule.gvk, c.onAttachment)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.attW[rule.gvk] = w
	}
	if err := c.start(ctx); err != nil {
		c.stop()
		return nil, err
	}
	if p := spec.ResyncPeriodSeconds; p != nil && *p > 0 {
		c.every(time.Duration(*p)*time.Second, func() {
			for _, dr := range c.resources {
				for _, o := range dr.w.index.list("", true) {
					c.enqueueForced(parentKey{gvk: dr.gvk, NamespacedName: keyOf(o)})
				}
			}
		})
	}
	c.log.Info("decoratorcontroller started", "resources", len(c.resources), "attachments", len(c.attach))
	return c, nil
}

// newDecorator validates dc and resolves its resources and hooks, without
// watching anything (startDecorator starts the watches; Render syncs
// offline). Errors carry the spec path.
func newDecorator(d deps, dc *mcv1a1.DecoratorController) (*decorator, error) {
	name := "decoratorcontroller/" + dc.Name
	d.log = d.log.WithValues("decoratorcontroller", dc.Name)
	c := &decorator{engine: newEngine(d, name), dc: dc.DeepCopy(), byGVK: map[schema.GroupVersionKind]*decorated{},
		attByGVK: map[schema.GroupVersionKind]*childRule{}, attW: map[schema.GroupVersionKind]*watch{},
		finalizer: decoratorFinalizerPrefix + dc.Name}
	c.engine.sync = c.syncObject
	spec := &c.dc.Spec
	var err error
	if c.followUp, err = followUpOf(dc); err != nil {
		return nil, err
	}
	if _, err = cleanupTimeoutOf(dc); err != nil {
		return nil, err
	}
	if len(spec.Resources) == 0 {
		return nil, errors.New("spec.resources: at least one resource is required")
	}
	for i, rr := range spec.Resources {
		path := fmt.Sprintf("spec.resources[%d]", i)
		res, err := d.resolve(rr.APIVersion, rr.Resource, path)
		if err != nil {
			return nil, err
		}
		if c.byGVK[res.gvk] != nil {
			return nil, fmt.Errorf("%s: %s is declared twice", path, res.gvk)
		}
		dr := &decorated{resource: res, ignoreSt: rr.IgnoreStatusChanges != nil && *rr.IgnoreStatusChanges}
		if dr.labels, err = selectorOf(rr.LabelSelector, path+".labelSelector"); err != nil {
			return nil, err
		}
		if dr.anns, err = annotationSelector(rr.AnnotationSelector, path+".annotationSelector"); err != nil {
			return nil, err
		}
		c.resources = append(c.resources, dr)
		c.byGVK[res.gvk] = dr
	}
	for i, ar := range spec.Attachments {
		path := fmt.Sprintf("spec.attachments[%d]", i)
		res, err := d.resolve(ar.APIVersion, ar.Resource, path)
		if err != nil {
			return nil, err
		}
		if c.attByGVK[res.gvk] != nil {
			return nil, fmt.Errorf("%s: %s is declared twice", path, res.gvk)
		}
		rule := &childRule{resource: res, method: mcv1a1.ChildUpdateOnDelete, path: path}
		if ar.UpdateStrategy != nil && ar.UpdateStrategy.Method != "" {
			rule.method = ar.UpdateStrategy.Method
		}
		if rule.rolling() {
			return nil, fmt.Errorf("%s.updateStrategy.method: %s is not supported for attachments (use OnDelete, Recreate or InPlace)", path, rule.method)
		}
		c.attach = append(c.attach, rule)
		c.attByGVK[res.gvk] = rule
	}
	var sync, fin, cust *mcv1a1.Hook
	if h := spec.Hooks; h != nil {
		sync, fin, cust = h.Sync, h.Finalize, h.Customize
	}
	customize, err := c.setHooks(sync, fin, cust, spec.EndpointConfigs)
	if err != nil {
		return nil, err
	}
	c.related = newRelated(c.engine, customize, c.dc)
	return c, nil
}

func (c *decorator) onObject(dr *decorated, old, obj *unstructured.Unstructured) {
	if obj == nil {
		c.dropState(parentKey{gvk: dr.gvk, NamespacedName: keyOf(old)})
		return
	}
	if old != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		return
	}
	pk := parentKey{gvk: dr.gvk, NamespacedName: keyOf(obj)}
	switch c.exp.observe(pk, obj, false) {
	case ignore:
		return
	case changed:
		// Objects that never matched and carry no finalizer of ours are not
		// our business.
		if !dr.matches(obj) && (old == nil || !dr.matches(old)) && !slices.Contains(obj.GetFinalizers(), c.finalizer) {
			return
		}
		if dr.ignoreSt && old != nil && onlyStatusChanged(old, obj) {
			return
		}
	}
	c.enqueue(pk)
}

// ownerKey returns the decorated object that attached o, when o carries
// this decorator's annotation.
func (c *decorator) ownerKey(o *unstructured.Unstructured) (parentKey, bool) {
	if o.GetAnnotations()[DecoratorAnnotation] != c.dc.Name {
		return parentKey{}, false
	}
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return parentKey{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return parentKey{}, false
	}
	for _, dr := range c.resources {
		if dr.gvk.Group == gv.Group && dr.gvk.Kind == ref.Kind {
			pk := parentKey{gvk: dr.gvk}
			pk.Name = ref.Name
			if dr.namespaced {
				pk.Namespace = o.GetNamespace()
			}
			return pk, true
		}
	}
	return parentKey{}, false
}

func (c *decorator) onAttachment(old, obj *unstructured.Unstructured) {
	cur, deleted := obj, obj == nil
	if cur == nil {
		cur = old
	}
	if old != nil && obj != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		return
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
}

func (c *decorator) syncObject(ctx context.Context, pk parentKey) error {
	dr := c.byGVK[pk.gvk]
	obj := dr.w.index.get(pk.NamespacedName)
	if obj == nil {
		c.dropState(pk)
		return nil
	}
	release, ours := c.ownParent(obj)
	if !ours {
		// Another member of the ring works this object.
		c.dropState(pk)
		return nil
	}
	defer release()
	c.counters.synced()
	if c.exp.pending(pk) {
		syncsTotal.WithLabelValues(c.name, "skipped").Inc()
		return nil
	}
	w := writes{}
	followUp, after := false, time.Duration(0)
	done := c.track(pk)
	defer func() { done(w, followUp, after) }()

	matches := dr.matches(obj)
	hasFin := slices.Contains(obj.GetFinalizers(), c.finalizer)
	deleting := obj.GetDeletionTimestamp() != nil
	// An object that opted out (stopped matching) is finalized like a
	// deleted one, when we had put our finalizer on it.
	finalizing := deleting || !matches
	var err error
	switch {
	case finalizing && !hasFin:
		return nil
	case finalizing && c.finHook == nil:
		// The finalize hook was removed from the controller.
		_, err = c.setFinalizer(ctx, obj, c.finalizer, false, w)
		return err
	case !finalizing && c.draining.Load():
		// The controller is being deleted: a live object loses the
		// finalizer without a call.
		if hasFin {
			if _, err = c.setFinalizer(ctx, obj, c.finalizer, false, w); err == nil {
				c.released(obj, "DecoratorController", c.dc.Name)
			}
		}
		return err
	case !finalizing && c.finHook != nil:
		if obj, err = c.setFinalizer(ctx, obj, c.finalizer, true, w); err != nil {
			return err
		}
	case !finalizing && hasFin:
		if obj, err = c.setFinalizer(ctx, obj, c.finalizer, false, w); err != nil {
			return err
		}
	}
	if !finalizing && c.syncHook == nil {
		// Only a finalize hook: live objects get the finalizer, no call.
		return nil
	}

	observed := childSet{}
	var observedList []*unstructured.Unstructured
	for _, rule := range c.attach {
		for _, o := range c.attW[rule.gvk].index.owned(obj.GetUID()) {
			if o.GetAnnotations()[DecoratorAnnotation] != c.dc.Name || (dr.namespaced && o.GetNamespace() != obj.GetNamespace()) {
				continue
			}
			observed.put(o)
			observedList = append(observedList, o)
		}
	}
	rules, err := c.related.rules(ctx, pk, obj)
	if err != nil {
		if hook.ReasonOf(err) != "" {
			return c.hookFailed(ctx, pk, obj, w, "Customize", err)
		}
		return err
	}
	caller, version, hookName := c.forPhase(finalizing)
	relatedMap, relatedList, err := c.related.objects(rules, version, obj.GetNamespace())
	if err != nil {
		return err
	}
	fp := fingerprint(fmt.Sprintf("finalizing=%v", finalizing), []*unstructured.Unstructured{obj}, observedList, relatedList)
	st, skip := c.upToDate(pk, fp, w)
	if skip {
		return nil
	}

	req := c.request(obj, observedList, relatedMap, version, finalizing)
	resp := &hookapi.DecoratorResponse{}
	if err := caller.Call(ctx, string(obj.GetUID()), req, resp); err != nil {
		return c.hookFailed(ctx, pk, obj, w, hookName, err)
	}
	desired, err := c.desiredAttachments(obj, dr, resp, hookName)
	if err != nil {
		return c.hookFailed(ctx, pk, obj, w, hookName, err)
	}
	var parentErrs []error
	errs := c.manage(ctx, obj, c.attach, observed, desired, w)
	cur, statusErr := c.writeStatus(ctx, obj, resultStatus(obj, resp.Status, errs), false, w)
	if statusErr != nil {
		parentErrs = append(parentErrs, statusErr)
	}
	cur, err = c.patchMetadata(ctx, cur, resp.Labels, resp.Annotations, w)
	if err != nil {
		parentErrs = append(parentErrs, err)
	}
	if statusErr != nil {
		// After the labels and annotations, which are written as the
		// hook asked even when its status is refused.
		c.statusRefused(ctx, cur, statusErr, w)
	}
	if finalizing && resp.Finalized && len(errs)+len(parentErrs) == 0 {
		if _, err := c.setFinalizer(ctx, cur, c.finalizer, false, w); err != nil {
			parentErrs = append(parentErrs, err)
		}
	}
	if resp.ResyncAfterSeconds > 0 {
		c.resyncAfter(pk, resyncDuration(resp.ResyncAfterSeconds))
	}
	followUp, after = c.settleFollowUp(pk, obj, w, len(w) > 0 && (c.followUp || finalizing), len(errs)+len(parentErrs) > 0)
	if len(errs)+len(parentErrs) > 0 {
		// Not fingerprinted: the retry must apply the same desired state
		// again. The API server's refusal is reported on the object.
		return c.writeFailed(pk, obj, hookName, errs, parentErrs)
	}
	c.synced(st, fp)
	return nil
}

// request is the sync or finalize request for the decorated object obj
// with its observed attachments (every declared attachment kind present)
// and related objects, keyed for the hook's contract version.
func (c *decorator) request(obj *unstructured.Unstructured, observed []*unstructured.Unstructured, related hookapi.ObjectMap, version mcv1a1.HookVersion, finalizing bool) *hookapi.DecoratorRequest {
	req := &hookapi.DecoratorRequest{Controller: c.dc, Object: obj, Attachments: hookapi.ObjectMap{}, Related: related, Finalizing: finalizing}
	for _, rule := range c.attach {
		req.Attachments.Init(rule.gvk)
	}
	for _, o := range observed {
		req.Attachments.Insert(version, obj.GetNamespace(), o)
	}
	return req
}

// desiredAttachments validates the attachments of a response (hookName
// "Sync" or "Finalize") for obj, a decorated object of rule dr, and marks
// each with DecoratorAnnotation. Errors are hook errors of reason
// InvalidResponse naming spec.hooks.<hook> and the response entry.
func (c *decorator) desiredAttachments(obj *unstructured.Unstructured, dr *decorated, resp *hookapi.DecoratorResponse, hookName string) (childSet, error) {
	desired, err := parseDesired(obj, dr.namespaced, c.attByGVK, resp.Attachments, "attachments")
	if err != nil {
		return nil, invalidResponse("spec.hooks."+lower(hookName), err)
	}
	for _, d := range desired.list() {
		ann := d.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[DecoratorAnnotation] = c.dc.Name
		d.SetAnnotations(ann)
	}
	return desired, nil
}

// metadataPatch is the metadata of a JSON merge patch (RFC 7386) that sets
// the labels and annotations a decorator asked for (null values remove the
// key), with only the keys that change; nil when nothing changes.
func metadataPatch(obj *unstructured.Unstructured, lbls, anns map[string]*string) map[string]any {
	diff := func(cur map[string]string, want map[string]*string) map[string]any {
		out := map[string]any{}
		for k, v := range want {
			old, has := cur[k]
			switch {
			case v == nil && has:
				out[k] = nil
			case v != nil && (!has || old != *v):
				out[k] = *v
			}
		}
		return out
	}
	md := map[string]any{}
	if d := diff(obj.GetLabels(), lbls); len(d) > 0 {
		md["labels"] = d
	}
	if d := diff(obj.GetAnnotations(), anns); len(d) > 0 {
		md["annotations"] = d
	}
	if len(md) == 0 {
		return nil
	}
	return md
}

// patchMetadata sets (or, for null values, removes) the labels and
// annotations a decorator asked for, with a JSON merge patch of only the
// keys that change.
func (c *decorator) patchMetadata(ctx context.Context, obj *unstructured.Unstructured, lbls, anns map[string]*string, w writes) (*unstructured.Unstructured, error) {
	md := metadataPatch(obj, lbls, anns)
	if md == nil {
		return obj, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": md})
	if err != nil {
		return obj, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	if err := c.client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return obj, fmt.Errorf("setting labels and annotations of %s %s: %w", obj.GetKind(), describe(obj), err)
	}
	w.add(u)
	writesTotal.WithLabelValues(c.name, "patch").Inc()
	return u, nil
}
