package controller

import (
	"context"
	"encoding/json"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// ErrPatchTargetMissing is the error of a Patcher write whose target object
// does not exist: a Patcher never creates objects. The write is retried.
var ErrPatchTargetMissing = errors.New("not found: a Patcher target does not create objects")

// patch applies desired as a JSON merge patch (RFC 7386) and removes the
// leaves the controller owns that desired no longer sets (all of them when
// desired is nil). What it owns is what it recorded at its last write of
// key and, for a Patcher target, what the object's PatchRecordAnnotation
// lists (the union of both), so that a field dropped while the controller
// ran, or before a restart or a Resync, is removed; the patch carries the
// new record. It reports whether an API call was made.
func (t *Target) patch(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	prevState, known := t.getWrittenState(key)
	if desired == nil && !known && t.patchRecord == "" {
		return false, nil
	}
	prev := prevState.doc
	var patch map[string]any
	if desired != nil {
		patch = stripServerFields(desired)
		delete(patch, "apiVersion")
		delete(patch, "kind")
		if t.patchRecord != "" {
			patch = withoutPatchRecord(patch, t.patchRecord)
		}
	}
	existing, err := t.get(ctx, key)
	if err != nil {
		return false, err
	}
	if existing == nil {
		return false, t.patchTargetGone(ctx, key, desired)
	}
	var hadRecord bool
	if t.patchRecord != "" {
		var rec string
		rec, hadRecord = patchRecordOf(existing.Object, t.patchRecord)
		if hadRecord && (!known || rec != prevState.record) {
			if recorded, err := parsePatchRecord(rec); err != nil {
				t.c.opts.Logger.Info("ignoring a malformed Patcher record on a target object", "kind", t.GVK.Kind, "key", key.String(), "annotation", t.patchRecord, "error", err.Error())
			} else {
				prev = unionLeaves(prev, recorded)
			}
		}
	}
	if desired == nil && len(prev) == 0 && !hadRecord {
		t.delWritten(key)
		return false, nil
	}
	if desired == nil && t.pol.deletion == opv1a1.DeletionOrphan {
		// The fields stay; only the record goes.
		t.delWritten(key)
		t.forgetHandoff(key)
		if !hadRecord {
			return false, nil
		}
		unmark := unmarkPatch(existing, t.patchRecord)
		if err := t.call(ctx, "patch", func() error { return t.client.Patch(ctx, t.GVK, key, unmark) }); err != nil {
			if apierrors.IsNotFound(err) {
				// Deleted since it was read: no record left to remove.
				return false, nil
			}
			return false, err
		}
		return true, nil
	}
	// Fields another writer took over are neither set nor removed.
	if patch, prev, err = t.patchHandOff(ctx, key, existing, patch, prev); err != nil {
		return false, err
	}
	full := object.RemovalPatch(prev, patch)
	var owned map[string]any
	var record string
	if desired != nil {
		// Only what the patch changes (or changed before) is ours to
		// remove. An Applier (written here without server-side apply)
		// owns every field it applies, changed or not, as server-side
		// apply with force ownership does: what it forgot (a Resync, a
		// restart) is then still removed when its output goes.
		base := existing.Object
		if t.Type == opv1a1.Applier {
			base = nil
		}
		owned = object.OwnedLeaves(base, patch, prev)
		if t.patchRecord != "" {
			record = encodePatchRecord(owned)
		}
	}
	if t.patchRecord != "" && !setPatchRecord(full, t.patchRecord, record, hadRecord) {
		// The output replaces metadata.annotations with a null: the record
		// goes with every other annotation; it is kept in memory only.
		record = ""
		t.c.opts.Logger.V(1).Info("a Patcher output that removes metadata.annotations keeps no record on the object", "kind", t.GVK.Kind, "key", key.String())
	}
	done := func() {
		if desired == nil {
			t.delWritten(key)
		} else {
			t.setPatched(key, owned, record)
		}
	}
	wrote, err := t.sendPatch(ctx, key, existing.Object, full)
	if apierrors.IsNotFound(err) {
		// Deleted since it was read (the informer cache lags).
		return wrote, t.patchTargetGone(ctx, key, desired)
	}
	if err != nil {
		// What was owned stays recorded (in memory, and on the object
		// unless the patch went through after all): the retry removes it.
		t.setPatched(key, prev, prevState.record)
		return false, err
	}
	done()
	return wrote, nil
}

// patchTargetGone is the end of a Patcher write of key whose object does
// not exist: nothing is recorded as written any more. With no output for
// it (desired nil) the fields to remove went with the object, which is
// success; a restore check (see RestoreTarget) has nothing to restore, as
// a Patcher never creates; the ordinary write path reports the missing
// target the output wants (ErrPatchTargetMissing, retried).
func (t *Target) patchTargetGone(ctx context.Context, key object.Key, desired map[string]any) error {
	t.delWritten(key)
	switch {
	case desired == nil:
		t.forgetHandoff(key)
		return nil
	case restoring(ctx):
		return errRestoreGone
	default:
		return ErrPatchTargetMissing
	}
}

// setPatched records, for key, the leaves a patch owns (owned, see
// object.OwnedLeaves) and the PatchRecordAnnotation value written with it.
func (t *Target) setPatched(key object.Key, owned map[string]any, record string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	st.written = writtenState{doc: owned, record: record, set: true}
	t.keys[key] = st
}

// patchOrCreate writes an Applier target without server-side apply (an
// offline client, a view): desired creates the object when it is missing,
// with its status through PatchStatus for a kind with the status
// subresource, and is applied as a Patcher applies it otherwise.
func (t *Target) patchOrCreate(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	if desired != nil {
		existing, err := t.get(ctx, key)
		if err != nil {
			return false, err
		}
		if existing == nil {
			if t.pol.adoption == opv1a1.Adopt {
				return false, ErrAdoptTargetMissing
			}
			obj := &unstructured.Unstructured{Object: stripServerFields(desired)}
			obj.SetGroupVersionKind(t.GVK)
			if err := t.call(ctx, "create", func() error { return t.client.Create(ctx, obj) }); err != nil {
				return false, err
			}
			patch := stripServerFields(desired)
			delete(patch, "apiVersion")
			delete(patch, "kind")
			if st, ok := statusOf(patch); ok && t.Status {
				// A kind with the status subresource is created without
				// its status: it follows through .../status. When that
				// fails, the status is not recorded as written, so the
				// retry (a patch) sends it.
				b, err := json.Marshal(map[string]any{"status": st})
				if err != nil {
					return true, err
				}
				if err := t.call(ctx, "patch-status", func() error { return t.client.PatchStatus(ctx, t.GVK, key, b) }); err != nil {
					t.setWritten(key, withoutStatus(patch))
					return true, err
				}
			}
			t.setWritten(key, patch)
			return true, nil
		}
		if t.pol.adoption == opv1a1.Create {
			if ok, err := t.appliedBefore(ctx, key); err != nil {
				return false, err
			} else if !ok {
				return false, t.createRefusal(key, "", "was not written by this controller")
			}
		}
	}
	return t.patch(ctx, key, desired)
}
