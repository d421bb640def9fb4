package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

func (t *Target) apply(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	prev, _ := t.getWritten(key)
	if desired == nil && prev == nil {
		return false, nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	if desired != nil {
		obj.Object = stripServerFields(desired)
	}
	obj.SetGroupVersionKind(t.GVK)
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	var existing *unstructured.Unstructured
	if desired != nil {
		var err error
		if existing, err = t.get(ctx, key); err != nil {
			return false, err
		}
		switch {
		case existing == nil && t.pol.adoption == opv1a1.Adopt:
			return false, ErrAdoptTargetMissing
		case existing == nil:
			t.forgetHandoff(key)
		case t.pol.adoption == opv1a1.Create:
			if ok, err := t.appliedBefore(ctx, key); err != nil {
				return false, err
			} else if !ok {
				return false, t.createRefusal(key, "", "has no metadata.managedFields entry of field manager "+t.c.fieldManager)
			}
		}
		unchanged := func() bool {
			return existing != nil && object.Contains(existing.Object, obj.Object) && (prev == nil || !droppedFields(prev, obj.Object))
		}
		if unchanged() {
			t.setWritten(key, obj.Object)
			return false, nil
		}
		// About to apply: the external fields another writer has written
		// are left out of the applied object. The other writer's change
		// took them from this field manager already (that is how they
		// were found handed off), so leaving them out is no reason to
		// apply: they are left out of what was applied before too.
		if kept, handed, err := t.keepHandedOff(ctx, key, existing, obj.Object, false); err != nil {
			return false, err
		} else if handed != nil {
			obj.Object = kept
			prev = t.withoutFields(prev, handed)
			if unchanged() {
				t.setWritten(key, obj.Object)
				return false, nil
			}
		}
	} else if t.pol.deletion == opv1a1.DeletionOrphan {
		// The fields stay; only the field manager's entries go.
		t.forgetHandoff(key)
		wrote, err := t.orphanApplied(ctx, key)
		if err == nil {
			t.delWritten(key)
		}
		return wrote, err
	}
	// What was sent is recorded, not the API server's answer that a
	// Client may decode into obj: with its defaults and status, the next
	// comparison would find them dropped from the output and apply again
	// on every change of the object.
	sent := obj.Object
	// Applying only the identity releases every field this manager owned.
	wrote, err := t.applyParts(ctx, existing, obj, prev, desired == nil)
	if err != nil {
		if desired == nil && apierrors.IsNotFound(err) {
			t.delWritten(key)
			return false, nil
		}
		return false, err
	}
	if desired == nil {
		t.delWritten(key)
	} else {
		t.setWritten(key, sent)
	}
	return wrote, nil
}

// FieldManager is the server-side apply field manager of an operator's
// Applier targets.
func FieldManager(operator string) string { return "dcontroller-" + operator }
