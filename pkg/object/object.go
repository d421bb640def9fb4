package object

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Key identifies an object of a given kind: namespace and name (namespace is
// empty for cluster-scoped objects).
type Key struct {
	Namespace string
	Name      string
}

// String returns "namespace/name", or "name" when the namespace is empty.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// KeyOf returns the key of a document from metadata.namespace and
// metadata.name. It fails when metadata.name is missing, empty or not a string.
func KeyOf(doc map[string]any) (Key, error) {
	meta, _ := doc["metadata"].(map[string]any)
	if meta == nil {
		return Key{}, fmt.Errorf("object has no metadata")
	}
	name, ok := meta["name"].(string)
	if !ok || name == "" {
		return Key{}, fmt.Errorf("object has no metadata.name")
	}
	ns, _ := meta["namespace"].(string)
	return Key{Namespace: ns, Name: name}, nil
}

// GVKOf returns the group/version/kind of a document from apiVersion and kind.
func GVKOf(doc map[string]any) schema.GroupVersionKind {
	av, _ := doc["apiVersion"].(string)
	k, _ := doc["kind"].(string)
	return schema.FromAPIVersionAndKind(av, k)
}

// DeepCopy returns a deep copy of a JSON-model value (maps, lists, scalars).
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = DeepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = DeepCopy(e)
		}
		return out
	default:
		return v
	}
}

// DeepCopyMap is DeepCopy for a map.
func DeepCopyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return DeepCopy(m).(map[string]any)
}

// Normalize converts a value decoded by encoding/json (float64 numbers) or
// YAML into the Kubernetes unstructured model: integral numbers become int64,
// others float64; maps and lists are converted recursively. It returns an
// error for values JSON cannot hold.
func Normalize(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := unmarshalModel(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// FromJSON decodes JSON bytes into the unstructured model (int64 for integers).
func FromJSON(b []byte) (map[string]any, error) {
	var out any
	if err := unmarshalModel(b, &out); err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a JSON object, got %T", out)
	}
	return m, nil
}

func unmarshalModel(b []byte, out *any) error {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*out = fromNumbers(raw)
	return nil
}

func fromNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = fromNumbers(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = fromNumbers(e)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	default:
		return v
	}
}

// MergePatch applies a JSON merge patch (RFC 7386, section 2) to doc and
// returns the result; doc and patch are not modified and the result shares
// no maps or lists with them. It works on the unstructured model directly,
// without a JSON round trip: a null in the patch removes the key, a map
// merges recursively, anything else (lists included) replaces.
func MergePatch(doc, patch map[string]any) (map[string]any, error) {
	out, _ := mergeValue(doc, patch).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// MergePatchChanges reports whether applying the JSON merge patch (RFC
// 7386, section 2) to doc would change it, that is whether MergePatch(doc,
// patch) differs from doc by Equal. It reads only the paths the patch names
// and copies nothing, so the cost is that of the patch, not of doc.
func MergePatchChanges(doc, patch map[string]any) bool {
	for k, v := range patch {
		cur, ok := doc[k]
		if v == nil {
			if ok {
				return true
			}
			continue
		}
		if !ok {
			return true
		}
		pm, isMap := v.(map[string]any)
		if !isMap {
			if !Equal(cur, v) {
				return true
			}
			continue
		}
		// A map patch over a value that is not a map replaces it.
		cm, curIsMap := cur.(map[string]any)
		if !curIsMap || cm == nil || MergePatchChanges(cm, pm) {
			return true
		}
	}
	return false
}

func mergeValue(target any, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return DeepCopy(patch)
	}
	tm, ok := target.(map[string]any)
	var out map[string]any
	if ok {
		out = make(map[string]any, len(tm)+len(pm))
		for k, v := range tm {
			out[k] = DeepCopy(v)
		}
	} else {
		out = make(map[string]any, len(pm))
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergeValue(out[k], v)
	}
	return out
}

// LeafPaths returns the paths of the leaves a merge patch sets (a leaf is any
// value that is not a map), sorted key by key. Each path is a list of keys. An empty map
// is no leaf: merged into an existing map it changes nothing (RFC 7386), so
// the patch does not own that map and a removal must not null it (the
// target's own keys would go with it).
func LeafPaths(patch map[string]any) [][]string {
	var out [][]string
	var walk func(prefix []string, m map[string]any)
	walk = func(prefix []string, m map[string]any) {
		for k, v := range m {
			p := append(append([]string(nil), prefix...), k)
			if sub, ok := v.(map[string]any); ok {
				walk(p, sub)
				continue
			}
			out = append(out, p)
		}
	}
	walk(nil, patch)
	slices.SortFunc(out, slices.Compare[[]string])
	return out
}

// RemovalPatch returns the merge patch that removes what prev set and next no
// longer sets: every leaf path of prev absent from next is set to null.
// next's own fields are included, so applying the result moves an object
// patched with prev to the state patched with next. metadata.name and
// metadata.namespace are never nulled. next may be nil (remove everything).
func RemovalPatch(prev, next map[string]any) map[string]any {
	out := DeepCopyMap(next)
	if out == nil {
		out = map[string]any{}
	}
	for _, p := range LeafPaths(prev) {
		if len(p) == 2 && p[0] == "metadata" && (p[1] == "name" || p[1] == "namespace") {
			if next == nil {
				setPath(out, p, prev["metadata"].(map[string]any)[p[1]])
			}
			continue
		}
		if hasPath(next, p) {
			continue
		}
		setPath(out, p, nil)
	}
	return out
}

func hasPath(m map[string]any, p []string) bool {
	cur := any(m)
	for _, k := range p {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		v, ok := mm[k]
		if !ok {
			return false
		}
		cur = v
	}
	return true
}

func setPath(m map[string]any, p []string, v any) {
	cur := m
	for _, k := range p[:len(p)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			if cur[k] != nil {
				// next sets a scalar where prev had a map: next wins.
				return
			}
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	if _, exists := cur[p[len(p)-1]]; exists && v == nil {
		return
	}
	cur[p[len(p)-1]] = v
}

// Equal reports whether two JSON-model values are deeply equal.
func Equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// ServerFields are the metadata fields owned by the API server; they are
// ignored when comparing desired and existing state and dropped from
// pipeline output before a write.
var ServerFields = []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}

// StripServerFields returns a copy of doc without ServerFields in metadata.
func StripServerFields(doc map[string]any) map[string]any {
	out := DeepCopyMap(doc)
	if meta, ok := out["metadata"].(map[string]any); ok {
		for _, f := range ServerFields {
			delete(meta, f)
		}
	}
	return out
}

// Contains reports whether sub is contained in super: every key of a sub map
// is in the super map with a contained value, lists have the same length and
// contained elements at each index, and scalars are equal (numbers by value).
// It is how a write is skipped when the API server's defaults added fields
// the desired state does not mention.
func Contains(super, sub any) bool {
	switch s := sub.(type) {
	case map[string]any:
		m, ok := super.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range s {
			sv, ok := m[k]
			if !ok {
				if v == nil {
					continue
				}
				return false
			}
			if !Contains(sv, v) {
				return false
			}
		}
		return true
	case []any:
		l, ok := super.([]any)
		if !ok || len(l) != len(s) {
			return false
		}
		for i := range s {
			if !Contains(l[i], s[i]) {
				return false
			}
		}
		return true
	default:
		if a, ok := toFloat(sub); ok {
			b, ok := toFloat(super)
			return ok && a == b
		}
		return reflect.DeepEqual(super, sub)
	}
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// HasPath reports whether the path of keys exists in m.
func HasPath(m map[string]any, p []string) bool { return hasPath(m, p) }

// GetPath returns the value at a path of keys and whether it exists.
func GetPath(m map[string]any, p []string) (any, bool) {
	cur := any(m)
	for _, k := range p {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// OwnedLeaves returns the part of a merge patch that a writer owns after
// applying it to existing: the leaves it owned before (in prev) and the
// leaves whose value in existing differs from the patch (the ones the patch
// changes). A leaf that already held the patch's value belongs to whoever
// set it, so removing the patch later must not remove it.
func OwnedLeaves(existing, patch, prev map[string]any) map[string]any {
	out := map[string]any{}
	for _, p := range LeafPaths(patch) {
		v, _ := GetPath(patch, p)
		if !HasPath(prev, p) {
			if cur, ok := GetPath(existing, p); ok && Equal(cur, v) {
				continue
			}
		}
		setPath(out, p, DeepCopy(v))
	}
	return out
}
