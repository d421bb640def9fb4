package controller

import (
	"context"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// Status through the status subresource.
//
// A target kind with the status subresource (Target.Status: every CRD with
// subresources.status, the native kinds with a status) keeps its status
// apart: the API server ignores the status of what is sent to the main
// endpoint (create, update, patch, apply) and writes only the status of
// what is sent to <resource>/status (Kubernetes API conventions, "Spec and
// Status"). An output's status therefore takes a second call:
//
//   - Updater: after the main write (or when none was needed), the object's
//     status is replaced (PUT .../status) with the output's when they
//     differ: when the server's status does not contain the output's, when
//     the output dropped a status field it set at the last write, or, with
//     no record of the last write (after a restart or a Resync), when the
//     two are not equal. An output that stops setting status clears it;
//     an output that never set one leaves the status alone (another
//     controller's, such as a Deployment's).
//   - Patcher: the status part of the merge patch (its fields and the
//     nulls that remove the status fields it dropped) goes to .../status,
//     the rest (with the PatchRecordAnnotation that lists the status
//     fields too) to the main endpoint; each is sent only when it changes
//     the object.
//   - Applier: the status is applied (server-side apply) through .../status
//     with the operator's field manager, the rest through the main
//     endpoint; applying no status releases the status fields it owned.
//
// Views have no subresource (their status is written with the object), and
// so has no kind when Options.HasStatus is nil (offline evaluation).

// statusOf returns the top-level status of doc and whether it has one: a
// null status is none (an output whose status expression finds nothing
// sets no status).
func statusOf(doc map[string]any) (any, bool) {
	v, ok := doc["status"]
	return v, ok && v != nil
}

// withoutStatus returns doc without its top-level status: doc itself when
// it has none, else a copy of its top level.
func withoutStatus(doc map[string]any) map[string]any {
	if _, ok := doc["status"]; !ok {
		return doc
	}
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != "status" {
			out[k] = v
		}
	}
	return out
}

// withStatus returns a copy of doc's top level whose status is status, or
// has none when ok is false.
func withStatus(doc map[string]any, status any, ok bool) map[string]any {
	out := maps.Clone(doc)
	if out == nil {
		out = map[string]any{}
	}
	if ok {
		out["status"] = status
	} else {
		delete(out, "status")
	}
	return out
}

// mainPart is what the target's main endpoint writes of doc: doc without
// its status when the kind has the status subresource, doc otherwise.
func (t *Target) mainPart(doc map[string]any) map[string]any {
	if !t.Status {
		return doc
	}
	return withoutStatus(doc)
}

// sameValue reports whether two JSON-model values are equal, numbers by
// value (object.Contains both ways).
func sameValue(a, b any) bool { return object.Contains(a, b) && object.Contains(b, a) }

// clearedStatus reports whether a status as the server holds it is empty:
// absent, null or an empty map (what a native kind's status reads as once
// cleared).
func clearedStatus(v any, ok bool) bool {
	if !ok || v == nil {
		return true
	}
	m, isMap := v.(map[string]any)
	return isMap && len(m) == 0
}

// priorStatus is what an Updater knows of the status it wrote before a
// write: the status of its last write when known, and whether it wrote a
// status at all (known, or read from the object's
// ManagedMetadataAnnotation after a restart).
type priorStatus struct {
	status any
	had    bool // the last known write set a status
	known  bool // the last write is known (in memory)
	wrote  bool // a status was written before (known, or the record says so)
}

// statusNeedsUpdate reports whether an Updater must replace cur, the
// status the server holds (curOK: it has one), with des, the output's
// (desOK: the output sets one); see the package comment above.
func statusNeedsUpdate(cur any, curOK bool, des any, desOK bool, prior priorStatus) bool {
	switch {
	case !desOK:
		return prior.wrote && !clearedStatus(cur, curOK)
	case !curOK:
		return true
	case !prior.known:
		return !sameValue(cur, des)
	case !object.Contains(cur, des):
		return true
	default:
		return prior.had && droppedFields(map[string]any{"status": prior.status}, map[string]any{"status": des})
	}
}

// updateStatus is an Updater's second call for a kind with the status
// subresource: it replaces the status of base, the object as the server
// holds it after the main write (its answer, or the object read when no
// main write was needed: either carries the resourceVersion to update),
// with desired's when statusNeedsUpdate says so. It reports whether a
// call was made.
func (t *Target) updateStatus(ctx context.Context, base, desired map[string]any, prior priorStatus) (bool, error) {
	des, desOK := statusOf(desired)
	cur, curOK := statusOf(base)
	if !statusNeedsUpdate(cur, curOK, des, desOK, prior) {
		return false, nil
	}
	obj := &unstructured.Unstructured{Object: withStatus(base, des, desOK)}
	obj.SetGroupVersionKind(t.GVK)
	if err := t.call(ctx, "update-status", func() error { return t.client.UpdateStatus(ctx, obj) }); err != nil {
		return false, err
	}
	return true, nil
}

// finishUpdate completes an Updater write of key whose main write was
// made (wrote) or found unneeded: base is the object as the server holds
// it after that write, written what the controller records of the write,
// output the pipeline output; record and digest as for setWrittenUpdate.
// For a kind with the status subresource, the status goes through
// updateStatus and the record keeps the output's status (the server's
// answer to the main write carries the old one); when that call fails,
// the main write is recorded with the status the server holds. It
// reports whether a call was made.
func (t *Target) finishUpdate(ctx context.Context, key object.Key, base, written, output map[string]any, record string, digest uint64, wrote bool, prior priorStatus) (bool, error) {
	if !t.Status {
		t.setWrittenUpdate(key, written, output, record, digest)
		return wrote, nil
	}
	wroteStatus, err := t.updateStatus(ctx, base, output, prior)
	if err != nil {
		cur, ok := statusOf(base)
		t.setWrittenUpdate(key, withStatus(written, cur, ok), output, record, digest)
		return wrote, err
	}
	des, ok := statusOf(output)
	t.setWrittenUpdate(key, withStatus(written, des, ok), output, record, digest)
	return wrote || wroteStatus, nil
}

// sendPatch sends full, a Patcher's merge patch (its record included), for
// key to existing, the object as read: to the main endpoint, or, for a
// kind with the status subresource, its status part to .../status and the
// rest to the main endpoint (main first: it carries the record that lists
// the status fields). A part that would not change existing is not sent.
// It reports whether a call was made.
func (t *Target) sendPatch(ctx context.Context, key object.Key, existing, full map[string]any) (bool, error) {
	main := full
	var status map[string]any
	if st, ok := full["status"]; ok && t.Status {
		main = withoutStatus(full)
		status = map[string]any{"status": st}
	}
	wrote := false
	if object.MergePatchChanges(existing, main) {
		b, err := json.Marshal(main)
		if err != nil {
			return false, err
		}
		if err := t.call(ctx, "patch", func() error { return t.client.Patch(ctx, t.GVK, key, b) }); err != nil {
			return false, err
		}
		wrote = true
	}
	if status != nil && object.MergePatchChanges(existing, status) {
		b, err := json.Marshal(status)
		if err != nil {
			return wrote, err
		}
		if err := t.call(ctx, "patch-status", func() error { return t.client.PatchStatus(ctx, t.GVK, key, b) }); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}

// applyParts applies obj (apiVersion, kind, name and namespace, and the
// fields the Applier owns) for key: as one apply, or, for a kind with the
// status subresource, its status through .../status and the rest through
// the main endpoint, each only when it differs from existing (nil: the
// object does not exist) or drops a field of prev, the last applied
// object (nil when unknown). release says obj carries no fields: applying
// it releases what the field manager owned (the status only when prev had
// one). It reports whether a call was made.
func (t *Target) applyParts(ctx context.Context, existing *unstructured.Unstructured, obj *unstructured.Unstructured, prev map[string]any, release bool) (bool, error) {
	fm := t.c.fieldManager
	if !t.Status {
		if err := t.call(ctx, "apply", func() error { return t.client.Apply(ctx, obj, fm) }); err != nil {
			return false, err
		}
		return true, nil
	}
	des, desOK := statusOf(obj.Object)
	_, prevOK := statusOf(prev)
	main := &unstructured.Unstructured{Object: withoutStatus(obj.Object)}
	var exist map[string]any
	if existing != nil {
		exist = existing.Object
	}
	wrote := false
	mainPrev := withoutStatus(prev)
	if release || existing == nil || !object.Contains(exist, main.Object) || (prev != nil && droppedFields(mainPrev, main.Object)) {
		if err := t.call(ctx, "apply", func() error { return t.client.Apply(ctx, main, fm) }); err != nil {
			return false, err
		}
		wrote = true
	}
	var sendStatus bool
	switch {
	case release:
		sendStatus = prevOK
	case desOK:
		cur, _ := statusOf(exist)
		sendStatus = existing == nil || !object.Contains(cur, des) ||
			(prevOK && droppedFields(map[string]any{"status": prev["status"]}, map[string]any{"status": des}))
	default:
		sendStatus = prevOK
	}
	if sendStatus {
		st := &unstructured.Unstructured{Object: withStatus(map[string]any{}, des, desOK)}
		st.SetGroupVersionKind(obj.GroupVersionKind())
		st.SetNamespace(obj.GetNamespace())
		st.SetName(obj.GetName())
		if err := t.call(ctx, "apply-status", func() error { return t.client.ApplyStatus(ctx, st, fm) }); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}
