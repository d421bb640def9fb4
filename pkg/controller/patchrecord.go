package controller

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PatchRecordPrefix is the prefix of the annotation in which a Patcher
// target records the fields it set; see PatchRecordAnnotation.
const PatchRecordPrefix = "patcher.dcontroller.io/"

// PatchRecordAnnotation returns the annotation key under which the Patcher
// controller <operator>/<controller> records, on each object it patches,
// the fields its patch set: "patcher.dcontroller.io/<operator>_<controller>"
// when that is a valid annotation key (a qualified name: its name part at
// most 63 characters of [A-Za-z0-9-_.], alphanumeric at both ends), else
// "patcher.dcontroller.io/h-<16 hex digits>", the FNV-1a 64-bit hash of
// "<operator>/<controller>". Operator names (DNS subdomains) have no '_',
// so the first '_' separates the two names. One key per controller: the
// Patchers of several controllers may patch one object, and each merge
// patch replaces its own key only.
//
// The value is a JSON array of the RFC 6901 JSON Pointers of the leaves
// (values that are not maps) the patch set and owns, sorted, e.g.
// ["/metadata/annotations/example.com~1note","/spec/replicas"]. A leaf is
// owned when the patch changed it, or owned it before: a leaf that already
// held the patch's value belongs to whoever set it.
func PatchRecordAnnotation(operator, controller string) string {
	key := PatchRecordPrefix + operator + "_" + controller
	if len(content.IsLabelKey(key)) == 0 {
		return key
	}
	h := fnv.New64a()
	h.Write([]byte(operator + "/" + controller))
	return fmt.Sprintf("%sh-%016x", PatchRecordPrefix, h.Sum64())
}

// jsonPointer returns the RFC 6901 JSON Pointer of a path of keys.
func jsonPointer(p []string) string {
	var b strings.Builder
	for _, k := range p {
		b.WriteByte('/')
		if strings.ContainsAny(k, "~/") {
			k = strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
		}
		b.WriteString(k)
	}
	return b.String()
}

// parseJSONPointer returns the keys of an RFC 6901 JSON Pointer; the empty
// pointer (the whole document) and a '~' not followed by '0' or '1' are
// errors.
func parseJSONPointer(s string) ([]string, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("%q is not a JSON Pointer to a field (RFC 6901: it starts with '/')", s)
	}
	keys := strings.Split(s[1:], "/")
	for i, k := range keys {
		if !strings.Contains(k, "~") {
			continue
		}
		for j := 0; j < len(k); j++ {
			if k[j] == '~' && (j+1 == len(k) || (k[j+1] != '0' && k[j+1] != '1')) {
				return nil, fmt.Errorf("%q: '~' must be followed by '0' or '1' (RFC 6901)", s)
			}
		}
		keys[i] = strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~")
	}
	return keys, nil
}

// leafPointers appends the JSON Pointers of the leaves of doc under prefix.
func leafPointers(out []string, prefix []string, doc map[string]any) []string {
	for k, v := range doc {
		p := append(prefix, k)
		if sub, ok := v.(map[string]any); ok {
			out = leafPointers(out, p, sub)
			continue
		}
		out = append(out, jsonPointer(p))
	}
	return out
}

// encodePatchRecord returns the PatchRecordAnnotation value of owned, the
// leaves a Patcher owns: "" when it has none.
func encodePatchRecord(owned map[string]any) string {
	ptrs := leafPointers(nil, make([]string, 0, 8), owned)
	if len(ptrs) == 0 {
		return ""
	}
	sort.Strings(ptrs)
	b, _ := json.Marshal(ptrs)
	return string(b)
}

// parsePatchRecord reads a PatchRecordAnnotation value into a document
// whose leaves (true) are the recorded paths: the prev of object.RemovalPatch
// and object.OwnedLeaves, which read only its paths. metadata.name and
// metadata.namespace are never recorded and are skipped; a path under a
// recorded leaf is skipped, and so is a leaf where another path goes deeper
// (a record this controller wrote has neither). A value that is not a JSON
// array of JSON Pointers is an error.
func parsePatchRecord(rec string) (map[string]any, error) {
	var ptrs []string
	if err := json.Unmarshal([]byte(rec), &ptrs); err != nil {
		return nil, fmt.Errorf("not a JSON array of JSON Pointers: %w", err)
	}
	doc := map[string]any{}
	for _, s := range ptrs {
		p, err := parseJSONPointer(s)
		if err != nil {
			return nil, err
		}
		if len(p) == 2 && p[0] == "metadata" && (p[1] == "name" || p[1] == "namespace") {
			continue
		}
		addLeafPath(doc, p)
	}
	return doc, nil
}

// addLeafPath adds the path p to doc as a leaf (true), unless a leaf of doc
// is a prefix of p or p is a prefix of a path of doc.
func addLeafPath(doc map[string]any, p []string) {
	cur := doc
	for _, k := range p[:len(p)-1] {
		v, ok := cur[k]
		if !ok {
			m := map[string]any{}
			cur[k] = m
			cur = m
			continue
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return
		}
		cur = m
	}
	if _, ok := cur[p[len(p)-1]]; !ok {
		cur[p[len(p)-1]] = true
	}
}

// unionLeaves returns a with the leaf paths of b that it lacks added (as
// addLeafPath adds them); a is not modified, b's values are not copied.
func unionLeaves(a, b map[string]any) map[string]any {
	if len(b) == 0 {
		return a
	}
	out := deepCopyMaps(a)
	var walk func(prefix []string, m map[string]any)
	walk = func(prefix []string, m map[string]any) {
		for k, v := range m {
			p := append(prefix[:len(prefix):len(prefix)], k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p, sub)
				continue
			}
			addLeafPath(out, p)
		}
	}
	walk(nil, b)
	return out
}

// deepCopyMaps copies the maps of doc; leaves are shared.
func deepCopyMaps(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopyMaps(sub)
		}
		out[k] = v
	}
	return out
}

// setPatchRecord sets the annotation key of patch, a merge patch about to
// be sent, to rec, or to null when rec is "" and had is true (the object
// has the annotation). It reports false, changing nothing, when the patch
// replaces metadata or metadata.annotations with something that is not a
// map (a null removes every annotation: the record cannot go with it).
func setPatchRecord(patch map[string]any, key, rec string, had bool) bool {
	if rec == "" && !had {
		return true
	}
	var v any = rec
	if rec == "" {
		v = nil
	}
	meta, ok := patch["metadata"]
	if !ok {
		patch["metadata"] = map[string]any{"annotations": map[string]any{key: v}}
		return true
	}
	m, isMap := meta.(map[string]any)
	if !isMap {
		return false
	}
	anns, ok := m["annotations"]
	if !ok {
		m["annotations"] = map[string]any{key: v}
		return true
	}
	a, isMap := anns.(map[string]any)
	if !isMap {
		return false
	}
	a[key] = v
	return true
}

// withoutPatchRecord returns patch, a merge patch made of a pipeline
// output (its top level and metadata maps are the caller's own), without
// the annotation key: an output that copies the annotations of the object
// it patches must not write the record (the record says what the patch
// set, it is not part of it).
func withoutPatchRecord(patch map[string]any, key string) map[string]any {
	meta, _ := patch["metadata"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	if _, ok := anns[key]; !ok {
		return patch
	}
	a := make(map[string]any, len(anns))
	for k, v := range anns {
		if k != key {
			a[k] = v
		}
	}
	meta["annotations"] = a
	return patch
}

// patchRecordOf returns the PatchRecordAnnotation value key of obj, "" if none.
func patchRecordOf(obj map[string]any, key string) (string, bool) {
	s, ok, _ := unstructured.NestedString(obj, "metadata", "annotations", key)
	return s, ok
}
