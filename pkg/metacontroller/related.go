package metacontroller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// relatedRule is a resolved rule of a customize response.
type relatedRule struct {
	res resource
	// namespace restricts the objects to one namespace ("" = any).
	namespace string
	labels    labels.Selector // nil: not used
	nsSel     labels.Selector // nil: not used
	names     map[string]bool // nil: not used
}

// related manages the customize hook and the watches of related kinds of
// one controller.
type related struct {
	e          *engine
	hook       hook.Caller
	controller any // the CompositeController or DecoratorController
	// version is the customize hook's contract version: it decides whether
	// a namespaced parent's rules reach other namespaces (relatedScope).
	version mcv1a1.HookVersion
	watches map[schema.GroupVersionKind]*watch
}

func newRelated(e *engine, h hook.Caller, controller any) *related {
	return &related{e: e, hook: h, controller: controller, version: customizeVersion(controller),
		watches: map[schema.GroupVersionKind]*watch{}}
}

// customizeVersion is the contract version of controller's customize hook
// (spec.hooks.customize.version, v1 when unset).
func customizeVersion(controller any) mcv1a1.HookVersion {
	var h *mcv1a1.Hook
	switch c := controller.(type) {
	case *mcv1a1.CompositeController:
		if c.Spec.Hooks != nil {
			h = c.Spec.Hooks.Customize
		}
	case *mcv1a1.DecoratorController:
		if c.Spec.Hooks != nil {
			h = c.Spec.Hooks.Customize
		}
	}
	return hookVersion(h)
}

// relatedScope applies Metacontroller's namespace rules to a rule of a
// parent in namespace parentNS ("" for a cluster-scoped parent), for a
// customize hook of the given version:
//
//   - a cluster-scoped parent, or a v2 customize hook: the rule selects
//     what it says (its namespace, its namespaceSelector, or every
//     namespace), cluster-scoped resources included;
//   - a v1 customize hook of a namespaced parent: a rule of a namespaced
//     resource with neither namespace nor namespaceSelector selects in the
//     parent's namespace; a rule with names (no labelSelector) and a
//     namespace other than the parent's is an error ("requested related
//     object namespace ... differs from parent object namespace ..." in
//     Metacontroller). A labelSelector with a namespace, a namespaceSelector
//     and a cluster-scoped resource select as for v2, as in Metacontroller
//     (pkg/controller/common/customize/manager.go).
func relatedScope(rule *relatedRule, version mcv1a1.HookVersion, parentNS, path string) error {
	if parentNS == "" || version == mcv1a1.HookVersionV2 || !rule.res.namespaced || rule.nsSel != nil {
		return nil
	}
	switch {
	case rule.namespace == "":
		rule.namespace = parentNS
	case rule.namespace != parentNS && rule.labels == nil:
		return fmt.Errorf("%s.namespace: %q differs from the parent's namespace %q: a v1 customize hook of a namespaced parent names objects of its own namespace only (set spec.hooks.customize.version: v2, or use a labelSelector)",
			path, rule.namespace, parentNS)
	}
	return nil
}

// rules returns the related rules of parent, calling the customize hook when
// the parent's UID or generation changed since the last call.
func (r *related) rules(ctx context.Context, pk parentKey, parent *unstructured.Unstructured) ([]relatedRule, error) {
	if r.hook == nil {
		return nil, nil
	}
	st := r.e.state(pk)
	key := fmt.Sprintf("%s/%d", parent.GetUID(), parent.GetGeneration())
	r.e.mu.Lock()
	if st.customizeKey == key {
		rules := st.related
		r.e.mu.Unlock()
		return rules, nil
	}
	r.e.mu.Unlock()
	var resp hookapi.CustomizeResponse
	if err := r.hook.Call(ctx, string(parent.GetUID()), r.request(parent), &resp); err != nil {
		return nil, err
	}
	out, err := r.parse(&resp, parent.GetNamespace())
	if err != nil {
		return nil, err
	}
	for _, rule := range out {
		if err := r.ensureWatch(ctx, rule.res.gvk); err != nil {
			return nil, err
		}
		if rule.nsSel != nil {
			if err := r.ensureWatch(ctx, namespaceGVK); err != nil {
				return nil, err
			}
		}
	}
	r.e.mu.Lock()
	st.customizeKey, st.related = key, out
	r.e.mu.Unlock()
	return out, nil
}

// request is the customize request for parent.
func (r *related) request(parent *unstructured.Unstructured) *hookapi.CustomizeRequest {
	return &hookapi.CustomizeRequest{Controller: r.controller, Parent: parent}
}

// parse resolves and checks the rules of a customize answer for a parent in
// namespace parentNS ("" when cluster-scoped). Errors are hook errors of
// reason InvalidResponse naming relatedResources[i].
func (r *related) parse(resp *hookapi.CustomizeResponse, parentNS string) ([]relatedRule, error) {
	var out []relatedRule
	for i, rr := range resp.RelatedResourceRules {
		path := fmt.Sprintf("relatedResources[%d]", i)
		if rr == nil {
			continue
		}
		res, err := r.e.resolve(rr.APIVersion, rr.Resource, path)
		if err != nil {
			return nil, invalidResponse("customize", err)
		}
		rule := relatedRule{res: res, namespace: rr.Namespace}
		if rr.LabelSelector != nil && len(rr.Names) > 0 {
			return nil, invalidResponse("customize", fmt.Errorf("%s: set labelSelector or names, not both", path))
		}
		if rr.Namespace != "" && rr.NamespaceSelector != nil {
			return nil, invalidResponse("customize", fmt.Errorf("%s: set namespace or namespaceSelector, not both", path))
		}
		if rr.LabelSelector != nil {
			if rule.labels, err = selectorOf(rr.LabelSelector, path+".labelSelector"); err != nil {
				return nil, invalidResponse("customize", err)
			}
		}
		if rr.NamespaceSelector != nil {
			if rule.nsSel, err = selectorOf(rr.NamespaceSelector, path+".namespaceSelector"); err != nil {
				return nil, invalidResponse("customize", err)
			}
		}
		if len(rr.Names) > 0 {
			rule.names = map[string]bool{}
			for _, n := range rr.Names {
				rule.names[n] = true
			}
		}
		if err := relatedScope(&rule, r.version, parentNS, path); err != nil {
			return nil, invalidResponse("customize", err)
		}
		out = append(out, rule)
	}
	return out, nil
}

func (r *related) ensureWatch(ctx context.Context, gvk schema.GroupVersionKind) error {
	r.e.mu.Lock()
	_, ok := r.watches[gvk]
	r.e.mu.Unlock()
	if ok {
		return nil
	}
	w, err := r.e.watch(ctx, "", gvk, func(old, obj *unstructured.Unstructured) { r.onEvent(gvk, old, obj) })
	if err != nil {
		return err
	}
	r.e.mu.Lock()
	if _, ok := r.watches[gvk]; ok {
		r.e.mu.Unlock()
		w.stop()
		return nil
	}
	r.watches[gvk] = w
	r.e.mu.Unlock()
	return nil
}

// onEvent resyncs the parents whose related rules select the object
// (before or after the change).
func (r *related) onEvent(gvk schema.GroupVersionKind, old, obj *unstructured.Unstructured) {
	if old != nil && obj != nil && old.GetResourceVersion() == obj.GetResourceVersion() {
		return
	}
	var hits []parentKey
	r.e.mu.Lock()
	for pk, st := range r.e.states {
		for i := range st.related {
			rule := &st.related[i]
			if gvk == namespaceGVK && rule.nsSel != nil {
				hits = append(hits, pk)
				break
			}
			if rule.res.gvk != gvk {
				continue
			}
			if (old != nil && r.matchesLocked(rule, old)) || (obj != nil && r.matchesLocked(rule, obj)) {
				hits = append(hits, pk)
				break
			}
		}
	}
	r.e.mu.Unlock()
	for _, pk := range hits {
		r.e.enqueue(pk)
	}
}

func (r *related) matchesLocked(rule *relatedRule, o *unstructured.Unstructured) bool {
	return rule.matches(o, func(name string) *unstructured.Unstructured {
		w := r.watches[namespaceGVK]
		if w == nil {
			return nil
		}
		return w.index.get(types.NamespacedName{Name: name})
	})
}

// matches reports whether the rule selects o; namespace looks up a
// Namespace by name (nil when there is none), for namespaceSelector.
func (rule *relatedRule) matches(o *unstructured.Unstructured, namespace func(name string) *unstructured.Unstructured) bool {
	if rule.namespace != "" && o.GetNamespace() != rule.namespace {
		return false
	}
	if rule.names != nil && !rule.names[o.GetName()] {
		return false
	}
	if rule.labels != nil && !rule.labels.Matches(labels.Set(o.GetLabels())) {
		return false
	}
	if rule.nsSel != nil {
		ns := namespace(o.GetNamespace())
		if ns == nil || !rule.nsSel.Matches(labels.Set(ns.GetLabels())) {
			return false
		}
	}
	return true
}

// objects returns the related objects selected by rules, keyed for the
// hook version. A watch that has not delivered its initial list yet makes
// the sync wait (errRequeue).
func (r *related) objects(rules []relatedRule, version mcv1a1.HookVersion, parentNS string) (hookapi.ObjectMap, []*unstructured.Unstructured, error) {
	m := hookapi.ObjectMap{}
	var all []*unstructured.Unstructured
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	for i := range rules {
		rule := &rules[i]
		m.Init(rule.res.gvk)
		w := r.watches[rule.res.gvk]
		if w == nil || !w.synced() || (rule.nsSel != nil && (r.watches[namespaceGVK] == nil || !r.watches[namespaceGVK].synced())) {
			return nil, nil, errRequeue{after: 100 * time.Millisecond}
		}
		var cands []*unstructured.Unstructured
		if rule.namespace != "" {
			cands = w.index.list(rule.namespace, false)
		} else {
			cands = w.index.list("", true)
		}
		for _, o := range cands {
			if r.matchesLocked(rule, o) {
				m.Insert(version, parentNS, o)
				all = append(all, o)
			}
		}
	}
	return m, all, nil
}
