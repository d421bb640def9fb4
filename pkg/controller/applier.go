package controller

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
		if existing != nil && object.Contains(existing.Object, obj.Object) && (prev == nil || !droppedFields(prev, obj.Object)) {
			t.setWritten(key, obj.Object)
			return false, nil
		}
	}
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
		t.setWritten(key, obj.Object)
	}
	return wrote, nil
}

// FieldManager is the server-side apply field manager of an operator's
// Applier targets.
func FieldManager(operator string) string { return "dcontroller-" + operator }
