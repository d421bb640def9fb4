package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ManagedMetadataAnnotation records what an Updater target's output set on
// the object, as JSON: {"labels":["tier"],"annotations":["note"],
// "output":"<digest>"} (keys sorted, empty lists omitted; "status":true
// before "output" when the output sets a status that goes through the
// status subresource). The next write
// removes the keys listed here that the output no longer sets and keeps
// every other label and annotation, so that a key the output dropped goes
// away even after a manager restart. "output" is a digest of the output
// written last (native targets only): an object whose recorded digest
// differs from the current output's is replaced, so a field the output
// dropped while the manager was down goes too (the status of a kind with
// the status subresource is left out of the digest: it is compared on its
// own, see status.go). On a view target the
// annotation is absent when the output sets no labels or annotations (views
// have no server defaults: their content is compared as a whole). The owner
// annotation and this annotation itself are never listed.
const ManagedMetadataAnnotation = "dcontroller.io/managed-metadata"

// managedKeys is the value of ManagedMetadataAnnotation.
type managedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
	// Status: the output sets a status, written through the status
	// subresource (see status.go); after a restart, an output that no
	// longer sets one clears it.
	Status bool   `json:"status,omitempty"`
	Output string `json:"output,omitempty"`
}

func (m managedKeys) empty() bool {
	return len(m.Labels) == 0 && len(m.Annotations) == 0 && !m.Status && m.Output == ""
}

// withoutMetadata returns doc without its metadata.
func withoutMetadata(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// encode returns m's JSON as json.Marshal writes it. Keys and values that
// need no escaping (printable ASCII but for the quote, the backslash, '<',
// '>' and '&', as label and annotation keys are) are written directly,
// anything else goes through json.Marshal.
func (m managedKeys) encode() string {
	n := len(`{"labels":[],"annotations":[],"status":true,"output":""}`) + len(m.Output)
	for _, k := range m.Labels {
		n += len(k) + 3
	}
	for _, k := range m.Annotations {
		n += len(k) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	ok := true
	list := func(name string, keys []string) {
		if len(keys) == 0 {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":[`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			ok = ok && plainJSONString(k)
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	list("labels", m.Labels)
	list("annotations", m.Annotations)
	if m.Status {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"status":true`...)
	}
	if m.Output != "" {
		if len(b) > 1 {
			b = append(b, ',')
		}
		ok = ok && plainJSONString(m.Output)
		b = append(b, `"output":"`...)
		b = append(b, m.Output...)
		b = append(b, '"')
	}
	b = append(b, '}')
	if !ok {
		b, _ = json.Marshal(m)
	}
	return string(b)
}

// plainJSONString reports whether json.Marshal writes s between quotes
// unchanged: printable ASCII without the quote, the backslash and the
// characters it escapes for HTML ('<', '>', '&').
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// parseManagedKeys reads ManagedMetadataAnnotation; a missing or malformed
// value is empty.
func parseManagedKeys(ann map[string]string) managedKeys {
	return parseManagedRecord(ann[ManagedMetadataAnnotation])
}

// parseManagedRecord reads a ManagedMetadataAnnotation value; an empty or
// malformed one is empty.
func parseManagedRecord(rec string) managedKeys {
	var m managedKeys
	if rec != "" {
		_ = json.Unmarshal([]byte(rec), &m)
	}
	return m
}

// metadataStrings returns metadata[field] of doc (labels or annotations) as
// Unstructured's GetLabels and GetAnnotations read it: null values read as
// "", and a map with a value that is not a string or null, or a field that
// is not a map, reads as nil. The map is doc's own when every value is a
// string (it must not be modified), a new one otherwise.
func metadataStrings(doc map[string]any, field string) map[string]any {
	meta, _ := doc["metadata"].(map[string]any)
	m, _ := meta[field].(map[string]any)
	for _, v := range m {
		if _, ok := v.(string); !ok {
			sm, found, err := unstructured.NestedNullCoercingStringMap(doc, "metadata", field)
			if err != nil || !found {
				return nil
			}
			out := make(map[string]any, len(sm))
			for k, v := range sm {
				out[k] = v
			}
			return out
		}
	}
	return m
}

// outputMetadataStrings returns metadata[field] of an output object about
// to be written (labels or annotations) as metadataStrings does, and
// normalizes it in doc as the API server would store it: a null map is
// removed, null values become "". A value that is neither a string nor
// null, or a field that is not a map, is an error naming it (the Kubernetes
// API types labels and annotations as maps of strings). doc must be the
// writer's own copy of the metadata map.
func outputMetadataStrings(doc map[string]any, field string) (map[string]any, error) {
	meta, _ := doc["metadata"].(map[string]any)
	v, ok := meta[field]
	if !ok {
		return nil, nil
	}
	if v == nil {
		delete(meta, field)
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata.%s is %T, want a map of strings", field, v)
	}
	coerced := false
	for k, e := range m {
		switch e.(type) {
		case string:
		case nil:
			coerced = true
		default:
			return nil, fmt.Errorf("metadata.%s[%q] is %v (%T), want a string (quote it, or convert it with @string)", field, k, e, e)
		}
	}
	if coerced {
		m = metadataStrings(doc, field)
		meta[field] = m
	}
	return m, nil
}

func (m managedKeys) union(o managedKeys) managedKeys {
	return managedKeys{Labels: unionSorted(m.Labels, o.Labels), Annotations: unionSorted(m.Annotations, o.Annotations)}
}

func unionSorted(a, b []string) []string {
	set := map[string]bool{}
	for _, k := range a {
		set[k] = true
	}
	for _, k := range b {
		set[k] = true
	}
	return sortedStrings(set)
}

func sortedStrings(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// outputKeys returns the label and annotation keys an output object sets
// (its labels and annotations), without the owner and managed-metadata
// annotations.
func outputKeys(outLabels, outAnns map[string]any) managedKeys {
	var m managedKeys
	if len(outLabels) > 0 {
		m.Labels = make([]string, 0, len(outLabels))
		for k := range outLabels {
			m.Labels = append(m.Labels, k)
		}
		sort.Strings(m.Labels)
	}
	for k := range outAnns {
		if k != opv1a1.OwnerAnnotation && k != ManagedMetadataAnnotation {
			m.Annotations = append(m.Annotations, k)
		}
	}
	sort.Strings(m.Annotations)
	return m
}

// keysOfRecord returns the label and annotation keys of rec, a
// ManagedMetadataAnnotation value this controller wrote, as
// parseManagedKeys does; cur are the keys of the record curRecord being
// written, which are reused when rec differs from it by the output digest
// alone.
func keysOfRecord(rec, curRecord string, cur managedKeys) managedKeys {
	if rec == "" {
		return managedKeys{}
	}
	if p, ok := recordLists(rec); ok {
		if q, ok := recordLists(curRecord); ok && p == q {
			return managedKeys{Labels: cur.Labels, Annotations: cur.Annotations}
		}
	}
	return parseManagedRecord(rec)
}

// recordLists returns the part of a record as managedKeys.encode writes it
// before its output digest (`{"labels":[...],` or `{`), ok when the rest
// is a digest of 16 hex digits and the closing brace.
func recordLists(rec string) (string, bool) {
	const field = `"output":"`
	i := strings.LastIndex(rec, field)
	if i < 0 {
		return "", false
	}
	rest := rec[i+len(field):]
	if len(rest) != 16+2 || rest[16:] != `"}` {
		return "", false
	}
	for j := 0; j < 16; j++ {
		if c := rest[j]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return rec[:i], true
}

// mergeManaged returns existing with the keys in prev that out no longer
// sets removed and out laid over it (nil when empty), as the value of a
// metadata map of an unstructured object, and the keys it removed that
// existing still had.
func mergeManaged(existing, out map[string]any, prev []string) (map[string]any, []string) {
	if len(existing) == 0 && len(out) == 0 {
		return nil, nil
	}
	var removed []string
	for _, k := range prev {
		if _, keep := out[k]; keep {
			continue
		}
		if _, ok := existing[k]; ok && !slices.Contains(removed, k) {
			removed = append(removed, k)
		}
	}
	// The merge is often one of the two maps as it is: return that one
	// rather than a copy (neither is modified by the callers).
	if coversKeys(out, existing, removed) {
		if len(out) == 0 {
			return nil, removed
		}
		return out, removed
	}
	if len(removed) == 0 && holdsStrings(existing, out) {
		return existing, nil
	}
	merged := make(map[string]any, len(existing)+len(out))
	for k, v := range existing {
		merged[k] = v
	}
	for k, v := range out {
		merged[k] = v
	}
	for _, k := range removed {
		delete(merged, k)
	}
	if len(merged) == 0 {
		merged = nil
	}
	return merged, removed
}

// coversKeys reports whether every key of existing is a key of out or one
// of removed.
func coversKeys(out, existing map[string]any, removed []string) bool {
	if len(existing) > len(out)+len(removed) {
		return false
	}
	for k := range existing {
		if _, ok := out[k]; !ok && !slices.Contains(removed, k) {
			return false
		}
	}
	return true
}

// holdsStrings reports whether existing has every key of out with the same
// string value.
func holdsStrings(existing, out map[string]any) bool {
	if len(out) > len(existing) {
		return false
	}
	for k, v := range out {
		s, ok := v.(string)
		if !ok {
			return false
		}
		if e, ok := existing[k].(string); !ok || e != s {
			return false
		}
	}
	return true
}
