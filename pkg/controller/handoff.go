package controller

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// fieldPath is one entry of a target's externalFields: a path of map keys.
type fieldPath struct {
	segs []string
	spec string // its spec path, spec.controllers[i].target.externalFields[k]
}

func (p fieldPath) String() string { return strings.Join(p.segs, ".") }

// parseExternalField parses an entry of externalFields: map keys joined
// by single dots (spec.replicas). It refuses an empty path or segment, a
// segment with a list index or wildcard ([, ], *), apiVersion and kind,
// and metadata other than metadata.labels and metadata.annotations (an
// object's name and namespace are its identity, the other metadata fields
// are the API server's or lists).
func parseExternalField(s string) (fieldPath, error) {
	if s == "" {
		return fieldPath{}, fmt.Errorf("must not be empty")
	}
	segs := strings.Split(s, ".")
	for _, seg := range segs {
		if seg == "" {
			return fieldPath{}, fmt.Errorf("%q has an empty segment: write map keys joined by single dots, e.g. spec.replicas", s)
		}
		if strings.ContainsAny(seg, "[]*") {
			return fieldPath{}, fmt.Errorf("%q names a list element or a wildcard: externalFields are paths of map keys and never go through a list; hand off the list's parent field instead", s)
		}
	}
	switch segs[0] {
	case "apiVersion", "kind":
		return fieldPath{}, fmt.Errorf("%q is the object's type and cannot be handed off", s)
	case "metadata":
		if len(segs) == 1 || (segs[1] != "labels" && segs[1] != "annotations") {
			return fieldPath{}, fmt.Errorf("%q cannot be handed off: of metadata, only metadata.labels and metadata.annotations (and keys under them) can; metadata.name and metadata.namespace are the object's identity", s)
		}
	}
	return fieldPath{segs: segs}, nil
}

// get returns the value at p in doc and whether it is set. An error says
// that a prefix of p holds a list: externalFields never go through one.
func (p fieldPath) get(doc map[string]any) (any, bool, error) {
	var cur any = doc
	for i, seg := range p.segs {
		switch m := cur.(type) {
		case map[string]any:
			v, ok := m[seg]
			if !ok {
				return nil, false, nil
			}
			cur = v
		case []any:
			return nil, false, fmt.Errorf("%s: %s holds a list: externalFields are paths of map keys and never go through a list", p.spec, strings.Join(p.segs[:i], "."))
		default:
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// with returns doc with the value at p set to v (removed when !set). The
// maps on the way are copied, the rest is shared with doc: doc may be a
// pipeline output, which is never modified. A prefix that is not a map is
// replaced by one when v is set.
func (p fieldPath) with(doc map[string]any, v any, set bool) map[string]any {
	out := maps.Clone(doc)
	if out == nil {
		out = map[string]any{}
	}
	cur := out
	for i, seg := range p.segs {
		if i == len(p.segs)-1 {
			if set {
				cur[seg] = v
			} else {
				delete(cur, seg)
			}
			break
		}
		next, _ := cur[seg].(map[string]any)
		if next == nil && !set {
			break
		}
		next = maps.Clone(next)
		if next == nil {
			next = map[string]any{}
		}
		cur[seg] = next
		cur = next
	}
	return out
}

// handoff is what a target learned of one object's external fields: on
// the object of uid, the fields (by index into externalFields) that
// another field manager has written.
type handoff struct {
	uid    types.UID
	handed []bool
}

// ownedBy reports, for each of fields, whether an entry of the
// metadata.managedFields of obj owns the field or a field under it: of a
// manager other than mine (others) and of mine (ours).
func ownedBy(obj map[string]any, fields []fieldPath, mine string) (others, ours []bool) {
	others, ours = make([]bool, len(fields)), make([]bool, len(fields))
	entries, _, _ := unstructured.NestedSlice(obj, "metadata", "managedFields")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m == nil {
			continue
		}
		set, _ := m["fieldsV1"].(map[string]any)
		manager, _ := m["manager"].(string)
		for i, f := range fields {
			if !fieldsV1Has(set, f.segs) {
				continue
			}
			if manager == mine {
				ours[i] = true
			} else {
				others[i] = true
			}
		}
	}
	return others, ours
}

// fieldsV1Has reports whether a FieldsV1 set (the API server's managed
// fields format: a map field k is the key "f:k") holds the field of segs
// or one under it.
func fieldsV1Has(set map[string]any, segs []string) bool {
	cur := set
	for _, seg := range segs {
		next, ok := cur["f:"+seg].(map[string]any)
		if !ok {
			return false
		}
		cur = next
	}
	return true
}

// handedOff returns which external fields of the target object of key
// are handed off: another field manager than the target's own
// (FieldManager) owns the field, or a field under it, and the target's
// does not. Only the fields in check are looked at; a field once found
// handed off on an object stays so for that object (by uid), so a
// target reads an object's managedFields at most once per field and
// object while it runs, and only when it would write the field
// otherwise. existing is the object as read (an informer cache drops
// managedFields: they are then read from the API server, see
// LiveReader).
func (t *Target) handedOff(ctx context.Context, key object.Key, existing *unstructured.Unstructured, check []bool) ([]bool, error) {
	n := len(t.pol.external)
	uid := existing.GetUID()
	t.mu.Lock()
	memo := t.pol.handedOff[key]
	t.mu.Unlock()
	if memo.uid != uid || len(memo.handed) != n {
		memo = handoff{uid: uid, handed: make([]bool, n)}
	}
	out := make([]bool, n)
	unknown := false
	for i := range n {
		if !check[i] {
			continue
		}
		if memo.handed[i] {
			out[i] = true
		} else {
			unknown = true
		}
	}
	if !unknown {
		return out, nil
	}
	live := existing
	if _, ok, _ := unstructured.NestedFieldNoCopy(existing.Object, "metadata", "managedFields"); !ok {
		var err error
		if live, err = t.getLive(ctx, key); err != nil {
			return nil, err
		}
		if live == nil || live.GetUID() != uid {
			// Gone or replaced since it was read: the write finds out.
			return out, nil
		}
	}
	others, ours := ownedBy(live.Object, t.pol.external, t.c.fieldManager)
	memo.handed = append([]bool(nil), memo.handed...)
	for i := range n {
		if check[i] && !out[i] && others[i] && !ours[i] {
			out[i], memo.handed[i] = true, true
			t.c.opts.Logger.Info("external field written by another field manager; handing it off", "kind", t.GVK.Kind, "key", key.String(), "field", t.pol.external[i].String())
		}
	}
	t.mu.Lock()
	if t.pol.handedOff == nil {
		t.pol.handedOff = map[object.Key]handoff{}
	}
	t.pol.handedOff[key] = memo
	t.mu.Unlock()
	return out, nil
}

// forgetHandoff drops what the target learned of the object of key (it
// is gone, or no longer the target's).
func (t *Target) forgetHandoff(key object.Key) {
	if len(t.pol.external) == 0 {
		return
	}
	t.mu.Lock()
	delete(t.pol.handedOff, key)
	t.mu.Unlock()
}

// keepHandedOff returns obj, the object an Updater or Applier is about to
// write over existing, with the external fields another writer has
// written taken from existing (keep) or left out (!keep, an Applier: what
// it does not apply it releases). Only the fields whose value in obj
// differs from existing's are looked at: a field that already holds
// obj's value needs no decision. It returns the fields handed off (by
// index into externalFields), nil when none is.
func (t *Target) keepHandedOff(ctx context.Context, key object.Key, existing *unstructured.Unstructured, obj map[string]any, keep bool) (map[string]any, []bool, error) {
	if len(t.pol.external) == 0 || existing == nil {
		return obj, nil, nil
	}
	check := make([]bool, len(t.pol.external))
	differ := false
	for i, f := range t.pol.external {
		ov, oset, err := f.get(obj)
		if err != nil {
			return nil, nil, err
		}
		lv, lset, err := f.get(existing.Object)
		if err != nil {
			return nil, nil, err
		}
		if oset != lset || (oset && !dbsp.Equal(ov, lv)) {
			check[i], differ = true, true
		}
	}
	if !differ {
		return obj, nil, nil
	}
	handed, err := t.handedOff(ctx, key, existing, check)
	if err != nil {
		return nil, nil, err
	}
	changed := false
	for i, f := range t.pol.external {
		if !handed[i] {
			continue
		}
		if keep {
			lv, lset, _ := f.get(existing.Object)
			obj = f.with(obj, object.DeepCopy(lv), lset)
		} else {
			obj = f.with(obj, nil, false)
		}
		changed = true
	}
	if !changed {
		return obj, nil, nil
	}
	return obj, handed, nil
}

// withoutFields returns doc without the external fields marked in
// fields (doc is not modified; nil stays nil).
func (t *Target) withoutFields(doc map[string]any, fields []bool) map[string]any {
	if doc == nil {
		return nil
	}
	for i, f := range t.pol.external {
		if fields[i] {
			if _, set, _ := f.get(doc); set {
				doc = f.with(doc, nil, false)
			}
		}
	}
	return doc
}

// patchHandOff leaves the handed-off external fields out of a Patcher's
// patch and out of prev, the fields it owns (so that the patch neither
// sets nor removes them, and its record no longer lists them). Only the
// fields the patch would change on existing are looked at: those it sets
// to another value, and those it owned and would remove.
func (t *Target) patchHandOff(ctx context.Context, key object.Key, existing *unstructured.Unstructured, patch, prev map[string]any) (map[string]any, map[string]any, error) {
	if len(t.pol.external) == 0 {
		return patch, prev, nil
	}
	check := make([]bool, len(t.pol.external))
	differ := false
	for i, f := range t.pol.external {
		pv, pset, err := f.get(patch)
		if err != nil {
			return nil, nil, err
		}
		lv, lset, err := f.get(existing.Object)
		if err != nil {
			return nil, nil, err
		}
		_, owned, _ := f.get(prev)
		if (pset && (!lset || !dbsp.Equal(pv, lv))) || (!pset && owned && lset) {
			check[i], differ = true, true
		}
	}
	if !differ {
		return patch, prev, nil
	}
	handed, err := t.handedOff(ctx, key, existing, check)
	if err != nil {
		return nil, nil, err
	}
	return t.withoutFields(patch, handed), t.withoutFields(prev, handed), nil
}
