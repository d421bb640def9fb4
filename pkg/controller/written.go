package controller

import (
	"maps"
	"slices"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// writtenState is what a controller last wrote for a target key: the
// object as written, without server fields, or, for an Updater (see
// setWrittenUpdate), the pipeline output it was made of and the digest of
// the output recorded with it. Only update reads the second form, and only
// update writes it (a controller's target type does not change).
type writtenState struct {
	doc      map[string]any
	digest   uint64 // with isOutput: the recorded output digest (native targets)
	isOutput bool
	// record is, for a Patcher, the PatchRecordAnnotation value of the
	// last write ("" when none was written).
	record string
	set    bool // something was written (the zero state: nothing)
}

func (t *Target) getWritten(key object.Key) (map[string]any, bool) {
	st, ok := t.getWrittenState(key)
	return st.doc, ok
}

func (t *Target) getWrittenState(key object.Key) (writtenState, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key].written
	ok := st.set
	return st, ok
}

// setWritten records what was written for key, without the fields the
// API server owns (object.ServerFields): the resourceVersion an update
// carries is not part of the output, and keeping it would make the next
// comparison find it "dropped" and rewrite the object on the echo of the
// controller's own write.
func (t *Target) setWritten(key object.Key, v map[string]any) {
	v = stripServerFields(v)
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	st.written = writtenState{doc: v, set: true}
	t.keys[key] = st
}

// setWrittenUpdate is setWritten for an Updater: written is the object as
// written (or found to hold the output), output the pipeline output it was
// made of, and record and digest the ManagedMetadataAnnotation value and
// output digest of the write. When written is output but for apiVersion,
// kind, metadata labels and annotations and server fields, which is what a
// write whose object the API server did not default leaves, and carries
// record, only output (shared with the outputs) and digest are kept: what
// update reads of the last write (see writtenRecord), without a copy of
// the object or of its record per target key.
func (t *Target) setWrittenUpdate(key object.Key, written, output map[string]any, record string, digest uint64) {
	if !writtenIsOutput(written, output) {
		t.setWritten(key, written)
		return
	}
	if rec, _, _ := unstructured.NestedString(written, "metadata", "annotations", ManagedMetadataAnnotation); rec != record {
		t.setWritten(key, written)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	st.written = writtenState{doc: output, digest: digest, isOutput: true, set: true}
	t.keys[key] = st
}

func (t *Target) delWritten(key object.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	st.written = writtenState{}
	t.putKey(key, st)
}

// writtenRecord returns the ManagedMetadataAnnotation value of the last
// write w, "" if none, and the label and annotation keys it lists. record
// and cur are the value and keys of the write being made: when w is an
// output with the same label and annotation keys, the lists are cur's and
// the value is record with w's digest.
func (t *Target) writtenRecord(w writtenState, record string, cur managedKeys) (string, managedKeys) {
	if !w.isOutput {
		rec, _, _ := unstructured.NestedString(w.doc, "metadata", "annotations", ManagedMetadataAnnotation)
		return rec, keysOfRecord(rec, record, cur)
	}
	meta, _ := w.doc["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	anns, _ := meta["annotations"].(map[string]any)
	_, hadStatus := statusOf(w.doc)
	hadStatus = hadStatus && t.Status
	if hadStatus == cur.Status && sameKeys(labels, cur.Labels, false) && sameKeys(anns, cur.Annotations, true) {
		keys := managedKeys{Labels: cur.Labels, Annotations: cur.Annotations}
		if t.IsView() {
			return record, keys
		}
		if rec, ok := withDigest(record, w.digest); ok {
			return rec, keys
		}
	}
	m := outputKeys(labels, anns)
	m.Status = hadStatus
	if !t.IsView() {
		m.Output = digestHex(w.digest)
	}
	if m.empty() {
		return "", m
	}
	return m.encode(), managedKeys{Labels: m.Labels, Annotations: m.Annotations}
}

// sameKeys reports whether the keys of m are those of the sorted list
// keys; with own, the owner and managed-metadata annotations of m are
// skipped (outputKeys leaves them out).
func sameKeys(m map[string]any, keys []string, own bool) bool {
	n := 0
	for k := range m {
		if own && (k == opv1a1.OwnerAnnotation || k == ManagedMetadataAnnotation) {
			continue
		}
		if _, found := slices.BinarySearch(keys, k); !found {
			return false
		}
		n++
	}
	return n == len(keys)
}

// withDigest returns record, a ManagedMetadataAnnotation value of a native
// target as encode writes it (ending in "output":"<16 hex digits>"}), with
// the digest d instead; ok is false when record does not end so.
func withDigest(record string, d uint64) (string, bool) {
	const field = `"output":"`
	const tail = len(`0123456789abcdef"}`)
	if len(record) < len(field)+tail || record[len(record)-tail-len(field):len(record)-tail] != field || record[len(record)-2:] != `"}` {
		return "", false
	}
	return record[:len(record)-tail] + digestHex(d) + `"}`, true
}

// writtenIsOutput reports whether the written object, without its server
// fields, has exactly the fields of output but for apiVersion, kind and
// metadata labels and annotations, with equal values, so that what
// droppedOutsideMetadataMaps finds dropped since the write is the same for
// either. An output that sets server fields is not.
func writtenIsOutput(written, output map[string]any) bool {
	n := 0
	for k, v := range written {
		switch k {
		case "apiVersion", "kind":
			continue
		case "metadata":
			wm, ok := v.(map[string]any)
			om, ook := output[k].(map[string]any)
			if !ok || !ook || !sameMetadataFields(wm, om) {
				return false
			}
		default:
			ov, ok := output[k]
			if !ok || !dbsp.Equal(v, ov) {
				return false
			}
		}
		n++
	}
	for k := range output {
		switch k {
		case "apiVersion", "kind":
			continue
		}
		n--
	}
	return n == 0
}

// sameMetadataFields compares metadata maps but for labels, annotations
// and, in written, server fields.
func sameMetadataFields(written, output map[string]any) bool {
	n := 0
	for k, v := range written {
		if k == "labels" || k == "annotations" || slices.Contains(object.ServerFields, k) {
			continue
		}
		ov, ok := output[k]
		if !ok || !dbsp.Equal(v, ov) {
			return false
		}
		n++
	}
	for k := range output {
		if k == "labels" || k == "annotations" {
			continue
		}
		n--
	}
	return n == 0
}

// stripServerFields returns doc without the metadata fields the API server
// owns (object.ServerFields). Only the top level and the metadata map are
// copied, the other values are shared with doc: the controller sets only
// top-level and metadata fields on what it writes, and neither modifies
// pipeline outputs nor the documents it records as written.
func stripServerFields(doc map[string]any) map[string]any {
	if doc == nil {
		return nil
	}
	out := maps.Clone(doc)
	if meta, ok := out["metadata"].(map[string]any); ok {
		meta = maps.Clone(meta)
		for _, f := range object.ServerFields {
			delete(meta, f)
		}
		out["metadata"] = meta
	}
	return out
}
