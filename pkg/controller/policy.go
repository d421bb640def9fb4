package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// policies are a target's field hand-off and lifecycle policies (the
// spec's externalFields, deletionPolicy and adoption), and what the
// hand-off learned of each object (handoff.go).
type policies struct {
	external []fieldPath
	deletion opv1a1.DeletionPolicy // Delete or Orphan
	adoption opv1a1.AdoptionPolicy // AdoptOrCreate, Adopt or Create
	// handedOff holds, per target key, the external fields found handed
	// off on the object of a uid. Guarded by Target.mu.
	handedOff map[object.Key]handoff
	// liveReads counts the reads of managedFields from the API server.
	liveReads int64
}

// ErrAdoptTargetMissing is the error of a write to a missing object by a
// target with adoption Adopt, which never creates objects. The write is
// retried, and made once the object exists.
var ErrAdoptTargetMissing = errors.New("not found: a target with adoption Adopt does not create objects")

// setPolicies checks and sets the target's externalFields, deletionPolicy
// and adoption from its spec. Errors name the spec field, e.g.
//
//	spec.controllers[0].target.externalFields[1]: "spec.containers[0].image" names a list element: ...
func (t *Target) setPolicies(spec opv1a1.Target) error {
	t.pol.deletion = spec.DeletionPolicy
	switch t.pol.deletion {
	case "":
		t.pol.deletion = opv1a1.DeletionDelete
	case opv1a1.DeletionDelete, opv1a1.DeletionOrphan:
	default:
		return fmt.Errorf("%s.deletionPolicy: unknown deletion policy %q (want Delete or Orphan)", t.Path, spec.DeletionPolicy)
	}
	t.pol.adoption = spec.Adoption
	switch t.pol.adoption {
	case "":
		t.pol.adoption = opv1a1.AdoptOrCreate
	case opv1a1.AdoptOrCreate:
	case opv1a1.Adopt, opv1a1.Create:
		if t.IsView() {
			return fmt.Errorf("%s.adoption: %s is not allowed on a view target: view objects carry no owner mark, and only the operator's controllers create them (use AdoptOrCreate)", t.Path, spec.Adoption)
		}
		if t.pol.adoption == opv1a1.Create && t.Type == opv1a1.Patcher {
			return fmt.Errorf("%s.adoption: Create is not allowed on a Patcher, which never creates objects (it patches existing ones: Adopt or AdoptOrCreate)", t.Path)
		}
	default:
		return fmt.Errorf("%s.adoption: unknown adoption policy %q (want AdoptOrCreate, Adopt or Create)", t.Path, spec.Adoption)
	}
	if len(spec.ExternalFields) > 0 && t.IsView() {
		return fmt.Errorf("%s.externalFields: not allowed on a view target: views have no field managers to hand a field off to", t.Path)
	}
	seen := map[string]int{}
	for k, s := range spec.ExternalFields {
		p, err := parseExternalField(s)
		if err != nil {
			return fmt.Errorf("%s.externalFields[%d]: %w", t.Path, k, err)
		}
		if prev, dup := seen[s]; dup {
			return fmt.Errorf("%s.externalFields[%d]: %q is also externalFields[%d]", t.Path, k, s, prev)
		}
		seen[s] = k
		p.spec = fmt.Sprintf("%s.externalFields[%d]", t.Path, k)
		t.pol.external = append(t.pol.external, p)
	}
	return nil
}

// DeletionPolicy returns the target's deletion policy (Delete or Orphan).
func (t *Target) DeletionPolicy() opv1a1.DeletionPolicy { return t.pol.deletion }

// Adoption returns the target's adoption policy (AdoptOrCreate, Adopt or
// Create).
func (t *Target) Adoption() opv1a1.AdoptionPolicy { return t.pol.adoption }

// fieldManagerKey carries, in a write's context, the field manager of the
// write (see WithFieldManager).
type fieldManagerKey struct{}

// WithFieldManager returns ctx carrying the field manager name that a
// Client's Create, Update and Patch should send (the API server's
// fieldManager parameter). A target's writes carry FieldManager(operator),
// which its hand-off of external fields tells apart from other writers in
// an object's metadata.managedFields.
func WithFieldManager(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, fieldManagerKey{}, name)
}

// FieldManagerFrom returns the field manager set by WithFieldManager, ""
// when none is.
func FieldManagerFrom(ctx context.Context) string {
	s, _ := ctx.Value(fieldManagerKey{}).(string)
	return s
}

// writeContext is ctx with the target's field manager.
func (t *Target) writeContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, fieldManagerKey{}, t.c.fieldManagerValue)
}

// LiveReader is implemented by a Client whose Get may serve an informer
// cache that drops metadata.managedFields: GetLive reads the object from
// the API server itself, managedFields included (NotFound when it does
// not exist). A Client without it is read with Get.
type LiveReader interface {
	GetLive(ctx context.Context, gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error)
}

// getLive reads the object of key with its managedFields (see LiveReader);
// nil when it does not exist.
func (t *Target) getLive(ctx context.Context, key object.Key) (*unstructured.Unstructured, error) {
	t.mu.Lock()
	t.pol.liveReads++
	t.mu.Unlock()
	TargetLiveReads.WithLabelValues(t.c.opts.Operator, t.c.name).Inc()
	var obj *unstructured.Unstructured
	var err error
	if lr, ok := t.client.(LiveReader); ok {
		obj, err = lr.GetLive(ctx, t.GVK, key)
	} else {
		obj, err = t.client.Get(ctx, t.GVK, key)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// LiveReads returns how many times the target read an object's
// managedFields from the API server (hand-off of external fields, adoption
// Create of an Applier, Orphan of an Applier).
func (t *Target) LiveReads() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pol.liveReads
}

// unmarkPatch returns the merge patch that removes the annotations of
// keys present on obj (nil when none is).
func unmarkPatch(obj *unstructured.Unstructured, keys ...string) []byte {
	anns := obj.GetAnnotations()
	del := map[string]any{}
	for _, k := range keys {
		if _, ok := anns[k]; ok {
			del[k] = nil
		}
	}
	if len(del) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": del}})
	return b
}

// orphanUpdated removes an Updater's marks (the owner and
// managed-metadata annotations) from existing, its object of key, and
// leaves the rest as it is (deletionPolicy Orphan). It reports whether an
// API call was made.
func (t *Target) orphanUpdated(ctx context.Context, key object.Key, existing *unstructured.Unstructured) (bool, error) {
	patch := unmarkPatch(existing, opv1a1.OwnerAnnotation, ManagedMetadataAnnotation)
	if patch == nil {
		return false, nil
	}
	if err := t.call(ctx, "patch", func() error { return t.client.Patch(ctx, t.GVK, key, patch) }); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	t.c.opts.Logger.V(1).Info("target object orphaned", "kind", t.GVK.Kind, "key", key.String())
	return true, nil
}

// orphanApplied removes the managedFields entries of the target's field
// manager from the object of key, leaving the fields and their values
// (deletionPolicy Orphan of an Applier): nothing then counts them as
// applied by this operator, and a later apply by another manager takes
// them over without a conflict. The entries are read from the API server
// and replaced by a merge patch with the object's resourceVersion (a
// Conflict when it changed meanwhile: the write is retried).
func (t *Target) orphanApplied(ctx context.Context, key object.Key) (bool, error) {
	live, err := t.getLive(ctx, key)
	if err != nil || live == nil {
		return false, err
	}
	mine := t.c.fieldManager
	entries, _, _ := unstructured.NestedSlice(live.Object, "metadata", "managedFields")
	kept := make([]any, 0, len(entries))
	for _, e := range entries {
		if m, _ := e.(map[string]any); m != nil && m["manager"] == mine {
			continue
		}
		kept = append(kept, e)
	}
	if len(kept) == len(entries) {
		return false, nil
	}
	if len(kept) == 0 {
		// An empty list leaves managedFields as they are; one empty entry
		// clears them (Kubernetes API, server-side apply: clearing
		// managedFields).
		kept = []any{map[string]any{}}
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": kept, "resourceVersion": live.GetResourceVersion()}})
	if err != nil {
		return false, err
	}
	if err := t.call(ctx, "patch", func() error { return t.client.Patch(ctx, t.GVK, key, b) }); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	t.c.opts.Logger.V(1).Info("target object orphaned", "kind", t.GVK.Kind, "key", key.String())
	return true, nil
}

// OrphanTimeout bounds Orphan's removal of one target's marks when its
// Operator is deleted.
const OrphanTimeout = 30 * time.Second

// Orphan removes the target's marks from every object it marked, when its
// deletionPolicy is Orphan (a no-op otherwise): the owner and
// managed-metadata annotations of an Updater's objects (those that carry
// its owner annotation), the record annotation of a Patcher's (those
// that carry it), the field manager entries of an Applier's (those it
// wrote since it started). The objects and their content stay. The
// runtime calls it when the Operator is deleted, after the controller
// stopped; it must not run while the controller writes. It returns the
// errors of the objects it could not unmark, each naming the target's
// spec path and the object.
func (t *Target) Orphan(ctx context.Context) error {
	if t.pol.deletion != opv1a1.DeletionOrphan {
		return nil
	}
	ctx = t.writeContext(ctx)
	keys := map[object.Key]bool{}
	for _, k := range t.WrittenKeys() {
		keys[k] = true
	}
	if !t.IsView() && t.Type != opv1a1.Applier {
		objs, err := t.client.List(ctx, t.GVK)
		if err != nil {
			return fmt.Errorf("%s: list %s: %w", t.Path, t.GVK.Kind, err)
		}
		for _, obj := range objs {
			if t.c.opts.Scope != nil && !t.c.opts.Scope(obj.GetNamespace()) {
				continue
			}
			if t.marked(obj) {
				keys[object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = true
			}
		}
	}
	var errs []error
	for _, k := range sortedKeys(keys) {
		if err := t.orphanKey(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("%s: orphaning %s %s: %w", t.Path, t.GVK.Kind, k, err))
		}
	}
	return errors.Join(errs...)
}

// marked reports whether obj carries the target's mark: an Updater's
// owner annotation, a Patcher's record annotation.
func (t *Target) marked(obj *unstructured.Unstructured) bool {
	switch t.Type {
	case opv1a1.Patcher:
		_, ok := patchRecordOf(obj.Object, t.patchRecord)
		return ok
	case opv1a1.Updater:
		return t.IsView() || obj.GetAnnotations()[opv1a1.OwnerAnnotation] == t.owner
	}
	return false
}

// orphanKey removes the target's marks from its object of key.
func (t *Target) orphanKey(ctx context.Context, key object.Key) error {
	defer t.delWritten(key)
	if t.Type == opv1a1.Applier && !t.IsView() {
		_, err := t.orphanApplied(ctx, key)
		return err
	}
	existing, err := t.get(ctx, key)
	if err != nil || existing == nil {
		return err
	}
	if !t.marked(existing) {
		return nil
	}
	keys := []string{opv1a1.OwnerAnnotation, ManagedMetadataAnnotation}
	if t.Type == opv1a1.Patcher {
		keys = []string{t.patchRecord}
	} else if t.IsView() {
		keys = []string{ManagedMetadataAnnotation}
	}
	patch := unmarkPatch(existing, keys...)
	if patch == nil {
		return nil
	}
	err = t.call(ctx, "patch", func() error { return t.client.Patch(ctx, t.GVK, key, patch) })
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// createRefusal is the OwnerConflictError of an existing object of key
// that a target with adoption Create did not create; why says how that
// shows ("carries no ... annotation").
func (t *Target) createRefusal(key object.Key, owner, why string) error {
	return &OwnerConflictError{Kind: t.GVK.Kind, Key: key, Owner: owner, NotCreated: why}
}

// appliedBefore reports whether an Applier wrote the object of key: it
// did in this run (its written record), or the object's managedFields
// have an entry of its field manager. For adoption Create.
func (t *Target) appliedBefore(ctx context.Context, key object.Key) (bool, error) {
	if _, ok := t.getWritten(key); ok {
		return true, nil
	}
	live, err := t.getLive(ctx, key)
	if err != nil || live == nil {
		return false, err
	}
	mine := t.c.fieldManager
	entries, _, _ := unstructured.NestedSlice(live.Object, "metadata", "managedFields")
	return slices.ContainsFunc(entries, func(e any) bool {
		m, _ := e.(map[string]any)
		return m != nil && m["manager"] == mine
	}), nil
}

// notCreatedWhy says why an Updater's object of owner annotation owner
// is not one it created, for a refusal by adoption Create.
func notCreatedWhy(owner string) string {
	if owner == "" {
		return "carries no " + opv1a1.OwnerAnnotation + " annotation"
	}
	return fmt.Sprintf("carries the %s annotation %q", opv1a1.OwnerAnnotation, owner)
}
