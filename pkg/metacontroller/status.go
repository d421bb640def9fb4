package metacontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcontroller/dcontroller/pkg/metacontroller/apply"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
)

// Condition of a parent whose hook fails.
const (
	// ConditionSynced is the type of the condition dcontroller sets in a
	// parent's status.conditions while its hook fails (status False); the
	// hook's own status replaces it on the next successful sync.
	ConditionSynced = "Synced"
)

// writes collects the resourceVersions of a sync's writes, for the
// expectations.
type writes map[objRef]string

func (w writes) add(o *unstructured.Unstructured) { w[refOf(o)] = o.GetResourceVersion() }

// update records an update of before into after, unless the API server
// found nothing to change (same resourceVersion: no event will come).
func (w writes) update(before, after *unstructured.Unstructured) {
	if after.GetResourceVersion() != before.GetResourceVersion() {
		w.add(after)
	}
}
func (w writes) deleted(o *unstructured.Unstructured) { w[refOf(o)] = deletedRV }

// writeStatus replaces parent's status with status plus observedGeneration
// (the Metacontroller convention), through the status subresource, or the
// main resource for kinds without one (observedGeneration only when asked:
// CompositeController parents get it, decorated objects do not). No write
// when the status is unchanged (an absent status is not the same as an
// empty one); a nil status leaves it alone.
//
// It returns the object as written (parent when there was no write).
func (e *engine) writeStatus(ctx context.Context, parent *unstructured.Unstructured, status map[string]any, observedGeneration bool, w writes) (*unstructured.Unstructured, error) {
	next, write := statusToWrite(parent, status, observedGeneration)
	if !write {
		return parent, nil
	}
	obj := parent.DeepCopy()
	obj.Object["status"] = next
	if err := e.updateStatus(ctx, obj, observedGeneration); err != nil {
		return parent, fmt.Errorf("updating the status of %s %s: %w", parent.GetKind(), describe(parent), err)
	}
	w.update(parent, obj)
	writesTotal.WithLabelValues(e.name, "status").Inc()
	return obj, nil
}

// statusToWrite is the status writeStatus writes for parent: status plus,
// with observedGeneration, the parent's metadata.generation as
// status.observedGeneration; write is false when status is nil (left
// alone) or equals the current one (an absent status and an empty one
// differ).
func statusToWrite(parent *unstructured.Unstructured, status map[string]any, observedGeneration bool) (next map[string]any, write bool) {
	if status == nil {
		return nil, false
	}
	next = runtime.DeepCopyJSON(status)
	if observedGeneration {
		next["observedGeneration"] = parent.GetGeneration()
	}
	// An absent status and an empty one differ: a hook that answers
	// status {} for an object without one gets it written.
	cur, has := parent.Object["status"].(map[string]any)
	if has && apply.Equal(cur, next) {
		return nil, false
	}
	return next, true
}

// updateStatus writes obj's status through the status subresource, falling
// back to an update of the whole object when the kind has none. Each
// status write through that fallback records a Warning Event on the object
// (statusSubresourceWarning); the Events are thus bounded by the status
// changes, not by the syncs.
//
// The fallback update bumps metadata.generation by one (the status is part
// of the object) without changing the spec; with observed, the status's
// observedGeneration (set to the generation by writeStatus) is written as
// the generation the update makes, so that observedGeneration equals
// metadata.generation once the status is written, as with a status
// subresource, and the next sync compares equal instead of writing again.
func (e *engine) updateStatus(ctx context.Context, obj *unstructured.Unstructured, observed bool) error {
	err := e.client.Status().Update(ctx, obj)
	if apierrors.IsNotFound(err) {
		probe := &unstructured.Unstructured{}
		probe.SetGroupVersionKind(obj.GroupVersionKind())
		if gerr := e.reader.Get(ctx, keyOf(obj), probe); gerr == nil {
			// The object exists: the kind has no status subresource.
			e.mu.Lock()
			if e.noStatus == nil {
				e.noStatus = map[schema.GroupVersionKind]bool{}
			}
			first := !e.noStatus[obj.GroupVersionKind()]
			e.noStatus[obj.GroupVersionKind()] = true
			e.mu.Unlock()
			msg := e.statusSubresourceWarning(obj.GroupVersionKind())
			if first {
				e.log.Info("the parent kind has no status subresource; writing statuses by updating the whole object", "kind", obj.GroupVersionKind().String())
			}
			if st, ok := obj.Object["status"].(map[string]any); ok && observed {
				st["observedGeneration"] = obj.GetGeneration() + 1
			}
			if err := e.client.Update(ctx, obj); err != nil {
				return err
			}
			e.warn(obj, EventSyncError, "UpdateStatus", "%s", msg)
			return nil
		}
	}
	return err
}

// statusSubresourceWarning is the note of the Warning Event (reason
// SyncError) recorded on an object whose status had to be written by an
// update of the whole object: "[<controller>] Sync error - CRD [<plural>.<group>]
// does not have subresource 'Status' enabled; ...". The words "does not have
// subresource 'Status' enabled" are those of Metacontroller's Event (which
// Metacontroller records on the CompositeController, and then ignores the
// controller).
func (e *engine) statusSubresourceWarning(gvk schema.GroupVersionKind) string {
	crd := gvk.Kind
	if m, err := e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		crd = m.Resource.GroupResource().String()
	}
	_, controller, _ := strings.Cut(e.name, "/")
	return fmt.Sprintf("[%s] Sync error - CRD [%s] does not have subresource 'Status' enabled; "+
		"the status is written by an update of the whole object (which also bumps metadata.generation)", controller, crd)
}

func describe(o metav1.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// hookFailed reports a failed hook call on the parent: a Warning Event and
// a Synced=False condition merged into its status (other status fields are
// kept; no write when the condition is already there). It returns the
// original error for the retry.
func (e *engine) hookFailed(ctx context.Context, pk parentKey, parent *unstructured.Unstructured, w writes, hookName string, err error) error {
	reason := hook.ReasonOf(err)
	if reason == "" {
		reason = "Error"
	}
	condReason, msg := hookName+"HookFailed", fmt.Sprintf("%s hook failed: %v", hookName, err)
	if reason == ReasonInvalidParent {
		// The hook was not called: the parent itself is unusable.
		condReason, msg = ReasonInvalidParent, fmt.Sprintf("the parent is invalid, the hook is not called: %v", errors.Unwrap(err))
	}
	e.warn(parent, EventSyncError, "Sync", "%s", msg)
	e.log.Info("sync failed", "parent", pk.String(), "hook", hookName, "reason", reason, "error", err.Error())
	syncsTotal.WithLabelValues(e.name, "failed").Inc()

	cur, _ := parent.Object["status"].(map[string]any)
	status := withSyncedFalse(cur, cur, condReason, msg, parent.GetGeneration())
	if apply.Equal(cur, status) {
		return err
	}
	obj := parent.DeepCopy()
	obj.Object["status"] = status
	if uerr := e.updateStatus(ctx, obj, false); uerr == nil {
		// Awaited without a follow-up: our own condition write must not
		// bypass the backoff.
		w.update(parent, obj)
		writesTotal.WithLabelValues(e.name, "status").Inc()
	} else {
		e.log.V(1).Info("could not write the failure condition", "parent", pk.String(), "error", uerr.Error())
	}
	return err
}

// Reasons of the Warning Events on a parent whose sync fails, those of
// Metacontroller: its users select them (kubectl get events
// --field-selector reason=SyncError). The finer detail is in the Synced
// condition's reason and the Event's message.
const (
	// EventSyncError: a hook failed, the parent is invalid, or a write of
	// the parent or of a child other than a create was refused.
	EventSyncError = "SyncError"
	// EventCreateError: the API server refused the creation of a child
	// (or attachment).
	EventCreateError = "CreateError"
)

// Reasons of the Synced=False condition besides "<Hook>HookFailed".
const (
	// ReasonInvalidParent: the parent cannot be synced (e.g. its
	// spec.selector is missing or empty); the hook is not called.
	ReasonInvalidParent = "InvalidParent"
	// ReasonChildWriteFailed: the hook answered, but the API server refused
	// a write of a child (or attachment); message names the object.
	ReasonChildWriteFailed = "ChildWriteFailed"
	// ReasonParentWriteFailed: the API server refused a write of the
	// parent itself (its status, finalizer or labels). Always in the
	// SyncError Event's message; a condition too when the refused write
	// was the status and the parent's current status takes the condition
	// (statusRefused).
	ReasonParentWriteFailed = "ParentWriteFailed"
)

// withSyncedFalse returns a copy of status (nil: an empty status) with the
// condition Synced=False (reason, message, observedGeneration generation)
// in status.conditions, in the shape of metav1.Condition.
// lastTransitionTime is carried over from prev's Synced condition when
// that one is already False, so a repeated failure writes nothing new.
func withSyncedFalse(status, prev map[string]any, reason, message string, generation int64) map[string]any {
	out := runtime.DeepCopyJSON(status)
	if out == nil {
		out = map[string]any{}
	}
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	if old := syncedCondition(prev); old != nil && old["status"] == string(metav1.ConditionFalse) {
		if t, ok := old["lastTransitionTime"].(string); ok {
			now = t
		}
	}
	cond := map[string]any{"type": ConditionSynced, "status": string(metav1.ConditionFalse), "reason": reason,
		"message": message, "observedGeneration": generation, "lastTransitionTime": now}
	conds, _ := out["conditions"].([]any)
	kept := make([]any, 0, len(conds)+1)
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok && cm["type"] == ConditionSynced {
			continue
		}
		kept = append(kept, c)
	}
	out["conditions"] = append(kept, cond)
	return out
}

// withoutSyncedFalse returns status without a Synced=False condition, and
// whether there was one: after a successful sync whose hook set no status,
// the failure it reported no longer holds.
func withoutSyncedFalse(status map[string]any) (map[string]any, bool) {
	if c := syncedCondition(status); c == nil || c["status"] != string(metav1.ConditionFalse) {
		return status, false
	}
	out := runtime.DeepCopyJSON(status)
	conds, _ := out["conditions"].([]any)
	kept := make([]any, 0, len(conds))
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok && cm["type"] == ConditionSynced {
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		delete(out, "conditions")
	} else {
		out["conditions"] = kept
	}
	return out, true
}

// syncedCondition finds the Synced condition in status.conditions.
func syncedCondition(status map[string]any) map[string]any {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if cm, ok := c.(map[string]any); ok && cm["type"] == ConditionSynced {
			return cm
		}
	}
	return nil
}

// refusals drops the conflicts from errs: a conflict means the object
// changed since the cache showed it, which the retry resolves, and is not
// worth a condition or an Event.
func refusals(errs []error) []error {
	var out []error
	for _, err := range errs {
		if !apierrors.IsConflict(err) {
			out = append(out, err)
		}
	}
	return out
}

// writeFailed reports the failed writes of a sync of parent and returns
// them joined, for the retry with backoff. Conflicts are retried quietly;
// refused creations of children get a CreateError Warning Event, other
// refused child writes and failed writes of the parent itself (status,
// finalizer, labels) a SyncError one; the message starts with
// ChildWriteFailed or ParentWriteFailed.
func (e *engine) writeFailed(pk parentKey, parent *unstructured.Unstructured, hookName string, childErrs, parentErrs []error) error {
	err := errors.Join(append(append([]error(nil), childErrs...), parentErrs...)...)
	if r := refusals(childErrs); len(r) > 0 {
		var creates, others []error
		for _, err := range r {
			if errors.As(err, new(createError)) {
				creates = append(creates, err)
			} else {
				others = append(others, err)
			}
		}
		if len(creates) > 0 {
			e.warn(parent, EventCreateError, "Sync", "%s: applying the %s hook's response failed: %v", ReasonChildWriteFailed, lower(hookName), errors.Join(creates...))
		}
		if len(others) > 0 {
			e.warn(parent, EventSyncError, "Sync", "%s: applying the %s hook's response failed: %v", ReasonChildWriteFailed, lower(hookName), errors.Join(others...))
		}
	}
	var gone []error
	for _, err := range parentErrs {
		if apierrors.IsNotFound(err) {
			gone = append(gone, err)
		}
	}
	if len(gone) == len(parentErrs) && len(childErrs) == 0 {
		// The parent was deleted meanwhile: nothing to report or retry.
		e.log.V(1).Info("the parent is gone", "parent", pk.String())
		return nil
	}
	syncsTotal.WithLabelValues(e.name, "failed").Inc()
	if r := refusals(parentErrs); len(r) > 0 {
		e.warn(parent, EventSyncError, "Sync", "%s: writing the %s hook's answer to this object failed: %v", ReasonParentWriteFailed, lower(hookName), errors.Join(r...))
	}
	if len(refusals(childErrs))+len(refusals(parentErrs)) == 0 {
		e.log.V(1).Info("write conflict; retrying", "parent", pk.String(), "error", err.Error())
	} else {
		e.log.Info("applying the hook's response failed; retrying with backoff", "parent", pk.String(), "error", err.Error())
	}
	return err
}

// statusRefused follows a refused write of parent's status (err, from
// writeStatus): it writes the status parent has now with the Synced=False
// condition of reason ParentWriteFailed, so that the parent shows why its
// status is not the one the hook returned (a status too large, or one its
// CRD's schema refuses) instead of the condition of an older failure.
// Conflicts and a deleted parent are not refusals and write nothing; a
// refusal of this write too is left to the Event.
func (e *engine) statusRefused(ctx context.Context, parent *unstructured.Unstructured, err error, w writes) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return
	}
	cur, _ := parent.Object["status"].(map[string]any)
	status := withSyncedFalse(cur, cur, ReasonParentWriteFailed, err.Error(), parent.GetGeneration())
	if _, werr := e.writeStatus(ctx, parent, status, false, w); werr != nil {
		e.log.V(1).Info("writing the ParentWriteFailed condition failed", "parent", describe(parent), "error", werr.Error())
	}
}

// createError is a refused creation of a child.
type createError struct{ err error }

func (c createError) Error() string { return c.err.Error() }
func (c createError) Unwrap() error { return c.err }

// resultStatus is the status a sync writes: the hook's status, with a
// Synced=False ChildWriteFailed condition when writes failed (errs), or
// the parent's current status without a stale Synced=False when the hook
// set none. Conflicts in errs do not count. nil means: leave the status
// alone.
func resultStatus(parent *unstructured.Unstructured, hookStatus map[string]any, errs []error) map[string]any {
	cur, _ := parent.Object["status"].(map[string]any)
	errs = refusals(errs)
	if len(errs) > 0 {
		base := hookStatus
		if base == nil {
			base = cur
		}
		return withSyncedFalse(base, cur, ReasonChildWriteFailed, errors.Join(errs...).Error(), parent.GetGeneration())
	}
	if hookStatus != nil {
		return hookStatus
	}
	if cleared, ok := withoutSyncedFalse(cur); ok {
		return cleared
	}
	return nil
}

// setFinalizer adds (add=true) or removes a finalizer with a JSON merge
// patch guarded by the observed resourceVersion. It returns the patched
// object (or parent when nothing was needed).
func (e *engine) setFinalizer(ctx context.Context, parent *unstructured.Unstructured, name string, add bool, w writes) (*unstructured.Unstructured, error) {
	fins := parent.GetFinalizers()
	has := slices.Contains(fins, name)
	if has == add {
		return parent, nil
	}
	var next []string
	if add {
		next = append(slices.Clone(fins), name)
	} else {
		for _, f := range fins {
			if f != name {
				next = append(next, f)
			}
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": next, "resourceVersion": parent.GetResourceVersion()}})
	obj := parent.DeepCopy()
	if err := e.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return nil, fmt.Errorf("updating the finalizers of %s %s: %w", parent.GetKind(), describe(parent), err)
	}
	w.add(obj)
	writesTotal.WithLabelValues(e.name, "patch").Inc()
	return obj, nil
}

// ownerRef is the controller owner reference of a child to parent.
func ownerRef(parent *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(), UID: parent.GetUID(),
		Controller: ptrTrue(), BlockOwnerDeletion: ptrTrue(),
	}
}

func ptrTrue() *bool { b := true; return &b }
