package metacontroller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
)

// childRule is a resolved child (or attachment) resource rule.
type childRule struct {
	resource
	method mcv1a1.ChildUpdateMethod
	checks []mcv1a1.StatusConditionCheck
	path   string
}

func (r *childRule) rolling() bool {
	return r.method == mcv1a1.ChildUpdateRollingRecreate || r.method == mcv1a1.ChildUpdateRollingInPlace
}

// childSet holds children by kind and key.
type childSet map[schema.GroupVersionKind]map[types.NamespacedName]*unstructured.Unstructured

func (s childSet) put(o *unstructured.Unstructured) {
	gvk := o.GroupVersionKind()
	if s[gvk] == nil {
		s[gvk] = map[types.NamespacedName]*unstructured.Unstructured{}
	}
	s[gvk][keyOf(o)] = o
}

func (s childSet) get(gvk schema.GroupVersionKind, k types.NamespacedName) *unstructured.Unstructured {
	return s[gvk][k]
}

func (s childSet) list() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, m := range s {
		for _, o := range m {
			out = append(out, o)
		}
	}
	return out
}

// invalidResponse wraps a response validation error as a hook error.
func invalidResponse(hookPath string, err error) error {
	return &hook.Error{Hook: hookPath, Reason: hook.ReasonInvalidResponse, Err: err}
}

// parseDesired validates the desired children of a response (field names
// the response field, e.g. "children") against the rules and the parent's
// scope, filling in the namespace of a namespaced parent.
func parseDesired(parent *unstructured.Unstructured, parentNamespaced bool, rules map[schema.GroupVersionKind]*childRule, items []map[string]any, field string) (childSet, error) {
	out := childSet{}
	for i, item := range items {
		path := fmt.Sprintf("%s[%d]", field, i)
		if item == nil {
			return nil, fmt.Errorf("%s: null object", path)
		}
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(item)}
		gvk := u.GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			return nil, fmt.Errorf("%s: apiVersion and kind are required", path)
		}
		rule, ok := rules[gvk]
		if !ok {
			what, spec := "child resource", "spec.childResources"
			if field == "attachments" {
				what, spec = "attachment", "spec.attachments"
			}
			declared := ruleList(rules)
			if declared == "" {
				declared = "none"
			}
			return nil, fmt.Errorf("%s: %s is not a declared %s (%s declares: %s)", path, gvk.Kind+"."+gvk.GroupVersion().String(), what, spec, declared)
		}
		if u.GetName() == "" {
			if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "name"); found && v != nil {
				if _, isString := v.(string); !isString {
					return nil, fmt.Errorf("%s.metadata.name: must be a string, not %s", path, jsonTypeName(v))
				}
			}
			return nil, fmt.Errorf("%s.metadata.name: required", path)
		}
		if ns, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "namespace"); found && ns != nil {
			if _, isString := ns.(string); !isString {
				return nil, fmt.Errorf("%s.metadata.namespace: must be a string, not %s", path, jsonTypeName(ns))
			}
		}
		switch {
		case !rule.namespaced:
			if u.GetNamespace() != "" {
				return nil, fmt.Errorf("%s.metadata.namespace: %s is cluster-scoped", path, gvk.Kind)
			}
			if parentNamespaced {
				return nil, fmt.Errorf("%s: a namespaced parent cannot own the cluster-scoped %s", path, gvk.Kind)
			}
		case parentNamespaced:
			if u.GetNamespace() == "" {
				u.SetNamespace(parent.GetNamespace())
			} else if u.GetNamespace() != parent.GetNamespace() {
				return nil, fmt.Errorf("%s.metadata.namespace: %q differs from the parent's namespace %q", path, u.GetNamespace(), parent.GetNamespace())
			}
		default:
			if u.GetNamespace() == "" {
				return nil, fmt.Errorf("%s.metadata.namespace: required for a namespaced child of a cluster-scoped parent", path)
			}
		}
		if out.get(gvk, keyOf(u)) != nil {
			return nil, fmt.Errorf("%s: duplicate %s %s", path, gvk.Kind, describe(u))
		}
		out.put(u)
	}
	return out, nil
}

// ruleList names the declared kinds, sorted ("ConfigMap.v1, Pod.v1").
func ruleList(rules map[schema.GroupVersionKind]*childRule) string {
	var names []string
	for gvk := range rules {
		names = append(names, gvk.Kind+"."+gvk.GroupVersion().String())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// applyChild converges one child: creates it when observed is nil,
// otherwise merges desired into it and, when that changes it, updates it
// in place or deletes it (to be recreated by a later sync) according to
// method. OnDelete never touches an existing child. A child being deleted
// is left alone.
//
// Under ServerSideApply the create and the in-place update are one
// server-side apply of the desired child (with the last-applied annotation
// and the controller reference) under the field manager, forcing
// ownership of its fields, as Metacontroller does. Whether there is
// anything to write is decided the same way for both strategies, by the
// merge against the last applied state: an unchanged desired child sends
// nothing, and a field another writer changed is set back.
func (e *engine) applyChild(ctx context.Context, parent, observed, desired *unstructured.Unstructured, method mcv1a1.ChildUpdateMethod, w writes) error {
	if observed == nil {
		u, err := e.desiredChild(parent, desired)
		if err != nil {
			return err
		}
		if e.applyStrategy == ServerSideApply {
			err = e.serverSideApply(ctx, u)
		} else {
			err = e.client.Create(ctx, u)
		}
		if err != nil {
			return createError{fmt.Errorf("creating %s %s: %w", u.GetKind(), describe(u), err)}
		}
		w.add(u)
		writesTotal.WithLabelValues(e.name, "create").Inc()
		return nil
	}
	if observed.GetDeletionTimestamp() != nil {
		return nil
	}
	merged, changed, err := apply.Apply(observed.Object, desired.Object)
	if err != nil {
		return err
	}
	if !changed {
		return nil
	}
	switch method {
	case mcv1a1.ChildUpdateRecreate, mcv1a1.ChildUpdateRollingRecreate:
		return e.deleteChild(ctx, observed, w)
	case mcv1a1.ChildUpdateInPlace, mcv1a1.ChildUpdateRollingInPlace:
		u := &unstructured.Unstructured{Object: merged}
		if e.applyStrategy == ServerSideApply {
			if u, err = e.desiredChild(parent, desired); err != nil {
				return err
			}
			err = e.serverSideApply(ctx, u)
		} else {
			setControllerRef(u, parent)
			err = e.client.Update(ctx, u)
		}
		if err != nil {
			return fmt.Errorf("updating %s %s: %w", u.GetKind(), describe(u), err)
		}
		w.update(observed, u)
		writesTotal.WithLabelValues(e.name, "update").Inc()
	}
	return nil
}

// desiredChild is what is sent for a desired child: a copy with the
// last-applied annotation and parent's controller reference.
func (e *engine) desiredChild(parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj, err := apply.WithLastApplied(desired.Object)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	setControllerRef(u, parent)
	return u, nil
}

// serverSideApply sends u as a server-side apply patch under the field
// manager with forced ownership, creating the object when it does not
// exist; u receives the object as written.
func (e *engine) serverSideApply(ctx context.Context, u *unstructured.Unstructured) error {
	return e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(e.fieldManager), client.ForceOwnership)
}

// deleteChild deletes a child (background propagation, guarded by its UID).
func (e *engine) deleteChild(ctx context.Context, obj *unstructured.Unstructured, w writes) error {
	if obj.GetDeletionTimestamp() != nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(obj.GroupVersionKind())
	u.SetNamespace(obj.GetNamespace())
	u.SetName(obj.GetName())
	uid := obj.GetUID()
	err := e.client.Delete(ctx, u, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", obj.GetKind(), describe(obj), err)
	}
	w.deleted(obj)
	writesTotal.WithLabelValues(e.name, "delete").Inc()
	return nil
}

// setControllerRef makes parent the controller owner of u, keeping other
// owner references.
func setControllerRef(u *unstructured.Unstructured, parent *unstructured.Unstructured) {
	refs := u.GetOwnerReferences()
	for _, r := range refs {
		if r.UID == parent.GetUID() {
			return
		}
	}
	u.SetOwnerReferences(append(refs, ownerRef(parent)))
}

// patchOwnerRefs writes obj's owner references with a JSON merge patch
// guarded by its resourceVersion.
func (e *engine) patchOwnerRefs(ctx context.Context, obj *unstructured.Unstructured, refs []metav1.OwnerReference, w writes) (*unstructured.Unstructured, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": refs, "resourceVersion": obj.GetResourceVersion()}})
	if err != nil {
		return nil, err
	}
	u := obj.DeepCopy()
	if err := e.client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, err
	}
	w.add(u)
	writesTotal.WithLabelValues(e.name, "patch").Inc()
	return u, nil
}

// adopt adds a controller reference to parent to an orphan.
func (e *engine) adopt(ctx context.Context, parent, orphan *unstructured.Unstructured, w writes) (*unstructured.Unstructured, error) {
	refs := append(orphan.GetOwnerReferences(), ownerRef(parent))
	u, err := e.patchOwnerRefs(ctx, orphan, refs, w)
	if err != nil {
		return nil, fmt.Errorf("adopting %s %s: %w", orphan.GetKind(), describe(orphan), err)
	}
	e.log.V(1).Info("adopted", "parent", describe(parent), "kind", orphan.GetKind(), "child", describe(orphan))
	return u, nil
}

// release removes parent's owner reference from a child that no longer
// matches its selector.
func (e *engine) release(ctx context.Context, parent, child *unstructured.Unstructured, w writes) error {
	var refs []metav1.OwnerReference
	for _, r := range child.GetOwnerReferences() {
		if r.UID != parent.GetUID() {
			refs = append(refs, r)
		}
	}
	if refs == nil {
		refs = []metav1.OwnerReference{}
	}
	if _, err := e.patchOwnerRefs(ctx, child, refs, w); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing %s %s: %w", child.GetKind(), describe(child), err)
	}
	e.log.V(1).Info("released", "parent", describe(parent), "kind", child.GetKind(), "child", describe(child))
	return nil
}

// passesChecks reports whether a child passes the status condition checks
// of a rolling update: every check's condition type is present in
// status.conditions with the required status and reason.
func passesChecks(child *unstructured.Unstructured, checks []mcv1a1.StatusConditionCheck) bool {
	conds, _, _ := unstructured.NestedSlice(child.Object, "status", "conditions")
	for _, chk := range checks {
		ok := false
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm == nil || cm["type"] != chk.Type {
				continue
			}
			if chk.Status != nil && cm["status"] != *chk.Status {
				continue
			}
			if chk.Reason != nil && cm["reason"] != *chk.Reason {
				continue
			}
			ok = true
			break
		}
		if !ok {
			return false
		}
	}
	return true
}

// selectorOf converts a label selector; nil means everything.
func selectorOf(s *metav1.LabelSelector, path string) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return sel, nil
}

// jsonTypeName names the JSON type of a decoded value: "number",
// "boolean", "object", "array" or "string".
func jsonTypeName(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	}
	return "number"
}
