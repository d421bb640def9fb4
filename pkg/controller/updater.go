package controller

import (
	"context"
	"maps"
	"slices"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dcontroller/dcontroller/pkg/object"
)

func (t *Target) update(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	existing, err := t.get(ctx, key)
	if err != nil {
		return false, err
	}
	if desired == nil {
		t.delWritten(key)
		t.forgetHandoff(key)
		if existing == nil {
			return false, nil
		}
		if !t.IsView() && existing.GetAnnotations()[opv1a1.OwnerAnnotation] != t.owner {
			// Not ours to delete (it existed before this controller wrote it).
			return false, nil
		}
		if t.pol.deletion == opv1a1.DeletionOrphan {
			return t.orphanUpdated(ctx, key, existing)
		}
		if err := t.call(ctx, "delete", func() error { return t.client.Delete(ctx, t.GVK, key) }); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return true, nil
	}
	obj := &unstructured.Unstructured{Object: stripServerFields(desired)}
	obj.SetGroupVersionKind(t.GVK)
	// The label and annotation keys the output sets are recorded on the
	// object, so that a later write (of this run or after a restart) removes
	// those the output drops.
	outLabels, err := outputMetadataStrings(obj.Object, "labels")
	if err != nil {
		return false, err
	}
	ann, err := outputMetadataStrings(obj.Object, "annotations")
	if err != nil {
		return false, err
	}
	ann = maps.Clone(ann)
	managed := outputKeys(outLabels, ann)
	_, managed.Status = statusOf(obj.Object)
	managed.Status = managed.Status && t.Status
	var digest uint64
	if !t.IsView() {
		// A digest of the output: when the output changed since the
		// recorded write, the record differs and the object is replaced,
		// so fields the output dropped go even after a restart (the API
		// server's defaults make "contains the output" no proof).
		digest = outputDigest(t.mainPart(obj.Object))
		managed.Output = digestHex(digest)
	}
	if ann == nil {
		ann = map[string]any{}
	}
	delete(ann, ManagedMetadataAnnotation)
	var record string
	if !managed.empty() {
		record = managed.encode()
		ann[ManagedMetadataAnnotation] = record
	}
	ours := true
	var existingAnns map[string]any
	if existing != nil {
		existingAnns = metadataStrings(existing.Object, "annotations")
	}
	if !t.IsView() {
		if existing != nil {
			if owner, _ := existingAnns[opv1a1.OwnerAnnotation].(string); owner != "" && owner != t.owner {
				if t.ownerLive(owner) {
					return false, &OwnerConflictError{Kind: t.GVK.Kind, Key: key, Owner: owner}
				}
				if t.pol.adoption == opv1a1.Create {
					return false, t.createRefusal(key, owner, notCreatedWhy(owner))
				}
				// The owner is gone: adopt the object, but not its
				// managed keys (they are not this controller's).
				ours = false
				t.c.opts.Logger.Info("adopting a target object whose owner no longer runs", "kind", t.GVK.Kind, "key", key.String(), "owner", owner)
			} else if owner == "" {
				if t.pol.adoption == opv1a1.Create {
					return false, t.createRefusal(key, owner, notCreatedWhy(owner))
				}
				ours = false
			}
		}
		ann[opv1a1.OwnerAnnotation] = t.owner
	}
	if len(ann) == 0 {
		ann = nil
	}
	if existing == nil {
		if t.pol.adoption == opv1a1.Adopt {
			return false, ErrAdoptTargetMissing
		}
		t.forgetHandoff(key)
		setMetadataMap(obj.Object, "annotations", ann)
		// What was sent is recorded: a Client may decode the API server's
		// answer into obj (defaults and status included), which the next
		// comparison would find dropped from the output.
		sent := obj.Object
		if err := t.call(ctx, "create", func() error { return t.client.Create(ctx, obj) }); err != nil {
			return false, err
		}
		return t.finishUpdate(ctx, key, obj.Object, sent, desired, record, digest, true, priorStatus{})
	}
	// Labels and annotations are merged with what is there; the output wins,
	// and the keys this controller set before and the output no longer sets
	// are removed (known from the last write, or from the object's own
	// record after a restart).
	prev, known := t.getWrittenState(key)
	var prevKeys managedKeys
	var prevRecord string
	if known {
		prevRecord, prevKeys = t.writtenRecord(prev, record, managed)
	}
	var prior priorStatus
	if known {
		prior.status, prior.had = statusOf(prev.doc)
		prior.known, prior.wrote = true, prior.had
	}
	if rec, ok := existingAnns[ManagedMetadataAnnotation].(string); ours && ok && (!known || rec != prevRecord) {
		recorded := parseManagedRecord(rec)
		prevKeys = prevKeys.union(recorded)
		prior.wrote = prior.wrote || recorded.Status
	}
	labels, droppedLabels := mergeManaged(metadataStrings(existing.Object, "labels"), outLabels, prevKeys.Labels)
	anns, droppedAnns := mergeManaged(existingAnns, ann, append(slices.Clip(prevKeys.Annotations), ManagedMetadataAnnotation))
	setMetadataMap(obj.Object, "labels", labels)
	setMetadataMap(obj.Object, "annotations", anns)
	keepMetadataList(obj.Object, existing.Object, "finalizers")
	keepMetadataList(obj.Object, existing.Object, "ownerReferences")
	// The API server may add defaults; what matters is that everything the
	// output says is there and nothing written before was dropped since.
	// The object carries the new record (the output wins the merge), so a
	// different record on the existing object answers Contains at once: an
	// output that changed since the last write changed its digest.
	unchanged := func() bool {
		return len(droppedLabels) == 0 && len(droppedAnns) == 0 &&
			(record == "" || existingAnns[ManagedMetadataAnnotation] == record) &&
			object.Contains(existing.Object, t.mainPart(obj.Object)) &&
			(!known || !droppedOutsideMetadataMaps(t.mainPart(prev.doc), t.mainPart(obj.Object))) &&
			(known || !t.IsView() || object.Equal(withoutMetadata(existing.Object), withoutMetadata(obj.Object)))
	}
	if unchanged() {
		return t.finishUpdate(ctx, key, existing.Object, obj.Object, desired, record, digest, false, prior)
	}
	// About to write: the external fields another writer has written keep
	// their live values (see Target.handedOff).
	if kept, handed, err := t.keepHandedOff(ctx, key, existing, obj.Object, true); err != nil {
		return false, err
	} else if handed != nil {
		obj.Object = kept
		if unchanged() {
			return t.finishUpdate(ctx, key, existing.Object, obj.Object, desired, record, digest, false, prior)
		}
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	sent := obj.Object // as for a create
	if err := t.call(ctx, "update", func() error { return t.client.Update(ctx, obj) }); err != nil {
		return false, err
	}
	return t.finishUpdate(ctx, key, obj.Object, sent, desired, record, digest, true, prior)
}

// droppedFields reports whether next no longer sets a path prev set (a
// leaf, or a map, empty ones included); the keys in skip are left out at
// the top level.
func droppedFields(prev, next map[string]any, skip ...string) bool {
	for k, v := range prev {
		if slices.Contains(skip, k) {
			continue
		}
		nv, ok := next[k]
		if !ok {
			return true
		}
		sub, isMap := v.(map[string]any)
		nsub, nIsMap := nv.(map[string]any)
		if isMap && nIsMap && droppedFields(sub, nsub) {
			return true
		}
	}
	return false
}

// setMetadataMap sets metadata[field] of doc to m, or removes it when m is
// nil, as Unstructured's SetLabels and SetAnnotations do (m is not copied).
func setMetadataMap(doc map[string]any, field string, m map[string]any) {
	meta, ok := doc["metadata"].(map[string]any)
	if m == nil {
		if ok {
			delete(meta, field)
		}
		return
	}
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	meta[field] = m
}

// keepMetadataList copies metadata[field] of existing (a list: finalizers,
// ownerReferences) into doc when doc does not set it. An update replaces the
// whole object, and an update without these lists would remove them: the
// finalizers and owner references other controllers (or the garbage
// collector's foreground deletion) put on the object are theirs, not the
// output's. An output that sets the list writes it as given; a list an
// output stops setting stays as the object has it.
func keepMetadataList(doc, existing map[string]any, field string) {
	emeta, _ := existing["metadata"].(map[string]any)
	v, ok := emeta[field].([]any)
	if !ok || len(v) == 0 {
		return
	}
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	if _, set := meta[field]; !set {
		meta[field] = runtime.DeepCopyJSONValue(v)
	}
}

// droppedOutsideMetadataMaps is droppedFields(prev, next) with
// metadata.labels and metadata.annotations of prev left out: an Updater
// tracks those by key (see ManagedMetadataAnnotation), and a key someone
// else removed is no reason to write. So are metadata.finalizers and
// ownerReferences, which an update carries over from the object
// (keepMetadataList): another controller removing its finalizer is no
// reason to write either.
func droppedOutsideMetadataMaps(prev, next map[string]any) bool {
	meta, ok := prev["metadata"]
	if !ok {
		return droppedFields(prev, next)
	}
	nmeta, ok := next["metadata"]
	if !ok {
		return true
	}
	sub, isMap := meta.(map[string]any)
	nsub, nIsMap := nmeta.(map[string]any)
	if isMap && nIsMap && droppedFields(sub, nsub, "labels", "annotations", "finalizers", "ownerReferences") {
		return true
	}
	return droppedFields(prev, next, "metadata")
}
