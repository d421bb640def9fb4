package metacontroller

import (
	"context"
	"crypto/sha1" // #nosec G505 -- Metacontroller's revision name hash
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// Labels of the ControllerRevisions of a parent.
const (
	revisionGroupLabel    = "metacontroller.k8s.io/apiGroup"
	revisionResourceLabel = "metacontroller.k8s.io/resource"
)

// revision is a parsed ControllerRevision.
type revision struct {
	obj      *unstructured.Unstructured
	patch    map[string]any
	children map[schema.GroupKind]map[string]bool
	dirty    bool
}

type childID struct {
	gk   schema.GroupKind
	name string
}

func parseRevision(o *unstructured.Unstructured) *revision {
	r := &revision{obj: o, children: map[schema.GroupKind]map[string]bool{}}
	r.patch, _ = o.Object["parentPatch"].(map[string]any)
	list, _ := o.Object["children"].([]any)
	for _, it := range list {
		m, _ := it.(map[string]any)
		g, _ := m["apiGroup"].(string)
		k, _ := m["kind"].(string)
		names, _ := m["names"].([]any)
		gk := schema.GroupKind{Group: g, Kind: k}
		for _, n := range names {
			if s, ok := n.(string); ok {
				r.add(childID{gk, s})
			}
		}
	}
	r.dirty = false
	return r
}

func (r *revision) has(id childID) bool { return r.children[id.gk][id.name] }

func (r *revision) add(id childID) {
	if r.children[id.gk] == nil {
		r.children[id.gk] = map[string]bool{}
	}
	if !r.children[id.gk][id.name] {
		r.children[id.gk][id.name] = true
		r.dirty = true
	}
}

func (r *revision) remove(id childID) {
	if r.children[id.gk][id.name] {
		delete(r.children[id.gk], id.name)
		r.dirty = true
	}
}

func (r *revision) empty() bool {
	for _, s := range r.children {
		if len(s) > 0 {
			return false
		}
	}
	return true
}

// render writes the children back into the object, sorted.
func (r *revision) render() *unstructured.Unstructured {
	o := r.obj.DeepCopy()
	var gks []schema.GroupKind
	for gk, s := range r.children {
		if len(s) > 0 {
			gks = append(gks, gk)
		}
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	list := []any{}
	for _, gk := range gks {
		var names []string
		for n := range r.children[gk] {
			names = append(names, n)
		}
		sort.Strings(names)
		anyNames := make([]any, len(names))
		for i, n := range names {
			anyNames[i] = n
		}
		list = append(list, map[string]any{"apiGroup": gk.Group, "kind": gk.Kind, "names": anyNames})
	}
	o.Object["children"] = list
	return o
}

// parentPatch extracts the revision fields (dotted paths) of parent.
func parentPatch(parent *unstructured.Unstructured, fields []string) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		path := strings.Split(f, ".")
		if v, found, _ := unstructured.NestedFieldNoCopy(parent.Object, path...); found {
			_ = unstructured.SetNestedField(out, runtime.DeepCopyJSONValue(v), path...)
		}
	}
	return out
}

// atRevision returns a copy of parent whose revision fields are those of
// patch.
func atRevision(parent *unstructured.Unstructured, fields []string, patch map[string]any) *unstructured.Unstructured {
	p := parent.DeepCopy()
	for _, f := range fields {
		path := strings.Split(f, ".")
		unstructured.RemoveNestedField(p.Object, path...)
		if v, found, _ := unstructured.NestedFieldNoCopy(patch, path...); found {
			_ = unstructured.SetNestedField(p.Object, runtime.DeepCopyJSONValue(v), path...)
		}
	}
	return p
}

// revisionName is Metacontroller's name of a ControllerRevision:
// "<resource>.<group>-<hash>" ("core" for the core group; the prefix is
// cut to 212 characters so the name fits 253), the hash the hex SHA-1 of
// the parent's UID followed by the JSON of the patch
// (pkg/controller/composite/controller_revision.go). The name only makes
// the creation idempotent: a revision is recognised by its parentPatch, so
// one adopted from an earlier parent (another UID) still serves.
func (c *composite) revisionName(parent *unstructured.Unstructured, patch map[string]any) string {
	b, _ := json.Marshal(patch)
	h := sha1.New() // #nosec G401 -- a name, not a security boundary; Metacontroller's hash
	h.Write([]byte(parent.GetUID()))
	h.Write(b)
	group := c.parent.gvr.Group
	if group == "" {
		group = "core"
	}
	prefix := c.parent.gvr.Resource + "." + group
	if len(prefix) > 253-41 {
		prefix = prefix[:253-41]
	}
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))
}

// revisionLabels are the labels of a new ControllerRevision of parent, those
// Metacontroller sets: controller-uid=<parent UID> under generateSelector,
// the parent's spec.template.metadata.labels otherwise, and the parent
// resource's group and name (metacontroller.k8s.io/apiGroup, /resource).
func (c *composite) revisionLabels(parent *unstructured.Unstructured) map[string]string {
	l := map[string]string{}
	if c.generate {
		l[ControllerUIDLabel] = string(parent.GetUID())
	} else if tl, found, err := unstructured.NestedStringMap(parent.Object, "spec", "template", "metadata", "labels"); found && err == nil {
		maps.Copy(l, tl)
	}
	l[revisionGroupLabel] = c.parent.gvr.Group
	l[revisionResourceLabel] = c.parent.gvr.Resource
	return l
}

// claimRevisions returns the ControllerRevisions of parent: those it
// controls, and the orphans (no controller owner reference) of its
// namespace that its selector matches, with the parent resource's
// metacontroller.k8s.io/apiGroup and /resource labels, which it adopts
// (adds its controller owner reference), as Metacontroller claims them
// (ControllerRef rules). Revisions controlled by another object are left
// alone; nothing is adopted while the parent is being deleted.
func (c *composite) claimRevisions(ctx context.Context, parent *unstructured.Unstructured, w writes) ([]*unstructured.Unstructured, error) {
	idx := c.revisions.index
	out := idx.owned(parent.GetUID())
	if parent.GetDeletionTimestamp() != nil {
		return out, nil
	}
	orphans := idx.orphanList(parent.GetNamespace(), false)
	if len(orphans) == 0 {
		return out, nil
	}
	sel, err := c.selector(parent)
	if err != nil {
		return out, nil // the children's claim reports it
	}
	kind := labels.SelectorFromSet(labels.Set{revisionGroupLabel: c.parent.gvr.Group, revisionResourceLabel: c.parent.gvr.Resource})
	for _, o := range orphans {
		set := labels.Set(o.GetLabels())
		if o.GetDeletionTimestamp() != nil || !kind.Matches(set) || !sel.Matches(set) {
			continue
		}
		adopted, err := c.adopt(ctx, parent, o, w)
		if err != nil {
			return out, err
		}
		out = append(out, adopted)
	}
	return out, nil
}

// samePatch compares two parentPatch values (a missing one is empty).
func samePatch(a, b map[string]any) bool {
	if a == nil {
		a = map[string]any{}
	}
	if b == nil {
		b = map[string]any{}
	}
	return apply.Equal(a, b)
}

// syncRolling converges the children when some child resource rolls. The
// children of rolling rules each belong to a revision of the parent
// (recorded in ControllerRevisions); a child keeps the desired state of its
// revision, computed by calling the sync hook with the parent's revision
// fields set to that revision's values. One child at a time moves to the
// latest revision, and only while every child already at the latest
// revision exists and passes the status checks. The revision records are
// written before the child, so a restart resumes the rollout where it
// stopped.
func (c *composite) syncRolling(ctx context.Context, parent *unstructured.Unstructured, observed, desired childSet, latestResp *hookapi.CompositeResponse, related hookapi.ObjectMap, w writes) []error {
	var plain, rolling []*childRule
	for _, r := range c.children {
		if r.rolling() {
			rolling = append(rolling, r)
		} else {
			plain = append(plain, r)
		}
	}
	errs := c.manage(ctx, parent, plain, observed, desired, w)

	patch := parentPatch(parent, c.fields)
	latestName := c.revisionName(parent, patch)
	claimed, err := c.claimRevisions(ctx, parent, w)
	if err != nil {
		return append(errs, err)
	}
	var all []*revision
	for _, o := range claimed {
		all = append(all, parseRevision(o))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].obj.GetName() < all[j].obj.GetName() })
	// The latest revision: the one of the latest name, else the first
	// whose parentPatch is the parent's (adopted, or named by another
	// scheme). Others with that patch hand their children over to it (and,
	// empty, are deleted below).
	var latest *revision
	for _, r := range all {
		if r.obj.GetName() == latestName {
			latest = r
		}
	}
	for _, r := range all {
		if latest == nil && samePatch(r.patch, patch) {
			latest = r
		}
	}
	var revs []*revision
	for _, r := range all {
		if r == latest {
			continue
		}
		if latest != nil && samePatch(r.patch, patch) {
			for gk, names := range r.children {
				for n := range names {
					latest.add(childID{gk, n})
					r.remove(childID{gk, n})
				}
			}
		}
		revs = append(revs, r)
	}
	if latest == nil {
		o := &unstructured.Unstructured{Object: map[string]any{"parentPatch": patch, "children": []any{}}}
		o.SetGroupVersionKind(controllerRevisionGVK)
		o.SetNamespace(parent.GetNamespace())
		o.SetName(latestName)
		o.SetLabels(c.revisionLabels(parent))
		setControllerRef(o, parent)
		if err := c.client.Create(ctx, o); err != nil {
			return append(errs, fmt.Errorf("creating ControllerRevision %s: %w", latestName, err))
		}
		w.add(o)
		writesTotal.WithLabelValues(c.name, "create").Inc()
		latest = parseRevision(o)
	}

	// The revision of each rolling child; unrecorded children are latest.
	revOf := func(id childID) *revision {
		if latest.has(id) {
			return latest
		}
		for _, r := range revs {
			if r.has(id) {
				return r
			}
		}
		return latest
	}
	type item struct {
		id   childID
		rule *childRule
		key  types.NamespacedName
	}
	var items []item
	for _, rule := range rolling {
		gk := rule.gvk.GroupKind()
		for k, o := range observed[rule.gvk] {
			if desired.get(rule.gvk, k) == nil {
				if err := c.deleteChild(ctx, o, w); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for k := range desired[rule.gvk] {
			items = append(items, item{id: childID{gk, k.Name}, rule: rule, key: k})
		}
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].id.gk != items[j].id.gk {
			return items[i].id.gk.String() < items[j].id.gk.String()
		}
		return items[i].id.name < items[j].id.name
	})

	// Desired states at the old revisions that still have children.
	oldDesired := map[*revision]childSet{}
	for _, it := range items {
		r := revOf(it.id)
		if r == latest || oldDesired[r] != nil {
			continue
		}
		resp, err := c.call(ctx, c.syncHook, atRevision(parent, c.fields, r.patch), observed, related, c.version, false)
		if err != nil {
			return append(errs, fmt.Errorf("sync hook at revision %s: %w", r.obj.GetName(), err))
		}
		ds, err := parseDesired(parent, true, c.byGVK, resp.Children, "children")
		if err != nil {
			return append(errs, fmt.Errorf("sync hook at revision %s: %w", r.obj.GetName(), err))
		}
		if c.generate {
			for _, d := range ds.list() {
				l := d.GetLabels()
				if l == nil {
					l = map[string]string{}
				}
				l[ControllerUIDLabel] = string(parent.GetUID())
				d.SetLabels(l)
			}
		}
		oldDesired[r] = ds
	}

	// Converge each child to its own revision's state.
	before := len(w)
	var pending []item
	ready := true
	for _, it := range items {
		r := revOf(it.id)
		if !r.has(it.id) {
			r.add(it.id)
		}
		want := desired.get(it.rule.gvk, it.key)
		if r != latest {
			if d := oldDesired[r].get(it.rule.gvk, it.key); d != nil {
				want = d
			}
			pending = append(pending, it)
		}
		obs := observed.get(it.rule.gvk, it.key)
		if err := c.applyChild(ctx, parent, obs, want, it.rule.method, w); err != nil {
			errs = append(errs, err)
		}
		if r == latest && (obs == nil || obs.GetDeletionTimestamp() != nil || !passesChecks(obs, it.rule.checks)) {
			ready = false
		}
	}
	// Forget children that are gone for good.
	for _, r := range append(revs, latest) {
		for gk, names := range r.children {
			for n := range names {
				found := false
				for _, it := range items {
					if it.id.gk == gk && it.id.name == n {
						found = true
						break
					}
				}
				if !found {
					r.remove(childID{gk, n})
				}
			}
		}
	}
	// Move one child to the latest revision when the rollout may go on.
	var move *item
	if ready && len(pending) > 0 && len(w) == before && len(errs) == 0 {
		move = &pending[0]
		revOf(move.id).remove(move.id)
		latest.add(move.id)
	}
	for _, r := range append(revs, latest) {
		switch {
		case r != latest && r.empty():
			if err := c.deleteChild(ctx, r.obj, w); err != nil {
				errs = append(errs, err)
			}
		case r.dirty:
			o := r.render()
			if err := c.client.Update(ctx, o); err != nil {
				errs = append(errs, fmt.Errorf("updating ControllerRevision %s: %w", o.GetName(), err))
				continue
			}
			w.update(r.obj, o)
			writesTotal.WithLabelValues(c.name, "update").Inc()
		}
	}
	if move != nil && len(errs) == 0 {
		c.log.Info("rolling update", "parent", describe(parent), "child", move.id.name, "revision", latest.obj.GetName())
		obs := observed.get(move.rule.gvk, move.key)
		if err := c.applyChild(ctx, parent, obs, desired.get(move.rule.gvk, move.key), move.rule.method, w); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
