package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
)

// DefaultMaxDeltaEntries is the default bound of the entries one pipeline
// stage may emit for one source change (Options.MaxDeltaEntries). It is
// far above what one change touches in ordinary controllers (the
// containers of one Pod, the Pods behind one Service, the objects of one
// namespace), while the few hundred MB that 10⁵ fresh documents may take
// bound what one change can cost the manager that runs every operator.
const DefaultMaxDeltaEntries = 100000

// DefaultMaxObjectBytes is the default bound of the JSON encoding of one
// target object a controller writes (Options.MaxObjectBytes): 1.5 MiB,
// etcd's default --max-request-bytes, above which the API server refuses
// to store an object.
const DefaultMaxObjectBytes = 3 << 19

// limitOf returns the effective bound of an option: def when 0, none (0)
// when negative.
func limitOf(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// refusal is a change the controller refused because a pipeline stage
// would emit too many entries for it; the controller keeps the previous
// state of the object until it changes again.
type refusal struct {
	source int
	key    object.Key
}

// inputDoc is a source document fed to the pipeline, with its dbsp.Hash,
// so that its removal does not walk it again.
type inputDoc struct {
	doc  map[string]any
	hash uint64
}

// inputUndo restores the controller's input map as it was before a batch.
type inputUndo struct {
	c *Controller
	// prev holds the entries as they were before each save, in order; a
	// key saved twice is restored to its first (pre-batch) entry because
	// restore walks the list backwards.
	prev []savedInput
}

type savedInput struct {
	at  refusal
	doc inputDoc // nil doc: the key was absent
}

// save records d as the entry of key in source's input map before the
// batch changes it (a zero d: the key was absent).
func (u *inputUndo) save(source int, key object.Key, d inputDoc) {
	u.prev = append(u.prev, savedInput{refusal{source, key}, d})
}

func (u *inputUndo) restore() {
	for i := len(u.prev) - 1; i >= 0; i-- {
		r, doc := u.prev[i].at, u.prev[i].doc
		if doc.doc == nil {
			u.c.inputs[r.source].del(r.key)
		} else {
			u.c.inputs[r.source].put(r.key, doc)
		}
	}
}

// handleBatch runs one batch of changes through the pipeline. When a stage
// would emit more than MaxDeltaEntries entries, the pipeline and the input
// map are left as they were and the batch is split in halves, each run on
// its own, down to the single change that is over the bound: that change
// is refused (see refusal) and the others go through. It returns the
// errors of the pipeline runs (reported by PipelineError) and of the
// writes, separately; ran reports whether the pipeline ran at all. top
// marks the whole batch (not a half), whose changes are counted.
func (c *Controller) handleBatch(ctx context.Context, changes []Change, top bool) (ran bool, perrs, werrs []error) {
	deltas, undo, touched, n := c.deltasOf(changes)
	if len(deltas) == 0 {
		return false, nil, nil
	}
	if top {
		c.smu.Lock()
		c.counters.Deltas += int64(n)
		c.smu.Unlock()
		DeltasIn.WithLabelValues(c.opts.Operator, c.name).Add(float64(n))
	}
	out, err := c.runPipeline(ctx, deltas)
	if c.cancelled != nil {
		return true, []error{err}, nil
	}
	var le *pipeline.LimitError
	if !errors.As(err, &le) {
		c.smu.Lock()
		for _, r := range touched {
			delete(c.refused, r)
		}
		c.smu.Unlock()
		if err != nil {
			perrs = append(perrs, err)
		}
		return true, perrs, c.applyOutput(ctx, out)
	}
	undo.restore()
	if len(changes) > 1 {
		half := len(changes) / 2
		_, p1, w1 := c.handleBatch(ctx, changes[:half], false)
		_, p2, w2 := c.handleBatch(ctx, changes[half:], false)
		return true, append(p1, p2...), append(w1, w2...)
	}
	ref := changes[0].New
	if ref == nil {
		ref = changes[0].Old
	}
	err = fmt.Errorf("%w; the change of %s %s is not applied: the controller keeps the object's previous state until it changes again "+
		"(the bound is the operator's spec.limits.maxDeltaEntries, else the manager's --max-delta-entries)", le, ref.GetKind(), object.Key{Namespace: ref.GetNamespace(), Name: ref.GetName()})
	c.smu.Lock()
	for _, r := range touched {
		c.refused[r] = err
	}
	c.smu.Unlock()
	c.recordError("pipeline", err)
	return true, nil, []error{err}
}

// deltasOf turns changes into one delta per source kind and updates the
// input map; the undo restores the input map. touched lists the source
// keys of the changes; n counts the changes that enter or leave a source's
// input (a change of an object outside every source's selector, or one a
// source's predicate ignores, is not counted).
func (c *Controller) deltasOf(changes []Change) (deltas map[string]*dbsp.ZSet, undo *inputUndo, touched []refusal, n int) {
	deltas = map[string]*dbsp.ZSet{}
	undo = &inputUndo{c: c}
	for _, ch := range changes {
		counted := false
		ref := ch.New
		if ref == nil {
			ref = ch.Old
		}
		if ref == nil {
			continue
		}
		for i := range c.sources {
			s := &c.sources[i]
			if s.Type == opv1a1.OneShot || s.Type == opv1a1.Periodic || !hasGVK(ref, s.GVK) {
				continue
			}
			if ch.Old != nil && ch.New != nil && s.Predicate != nil && !s.Predicate.Update(ch.Old, ch.New) {
				continue
			}
			key := object.Key{Namespace: ref.GetNamespace(), Name: ref.GetName()}
			prev, ok := c.inputs[i].get(key)
			undo.save(i, key, prev)
			touched = append(touched, refusal{i, key})
			z := deltas[s.GVK.Kind]
			if z == nil {
				z = dbsp.NewZSet()
			}
			if ok {
				z.InsertHashed(prev.hash, prev.doc, -1)
				c.inputs[i].del(key)
			}
			matches := ch.New != nil && s.Matches(ch.New)
			if matches {
				in := inputDoc{doc: withoutManagedFields(ch.New.Object)}
				in.hash = dbsp.Hash(in.doc)
				z.InsertHashed(in.hash, in.doc, 1)
				c.inputs[i].put(key, in)
			}
			if (ok || matches) && !counted {
				counted = true
				n++
			}
			if !z.IsEmpty() {
				deltas[s.GVK.Kind] = z
			} else {
				delete(deltas, s.GVK.Kind)
			}
		}
	}
	return deltas, undo, touched, n
}

// withoutManagedFields returns doc without metadata.managedFields, server
// bookkeeping that no pipeline needs: doc itself when it has none, else a
// copy of its top level and metadata maps (doc is not modified; the other
// maps are shared).
func withoutManagedFields(doc map[string]any) map[string]any {
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		return doc
	}
	if _, ok := meta["managedFields"]; !ok {
		return doc
	}
	meta = maps.Clone(meta)
	delete(meta, "managedFields")
	doc = maps.Clone(doc)
	doc["metadata"] = meta
	return doc
}

// refusedErrors returns the errors of the refused changes in key order.
// Callers hold smu.
func (c *Controller) refusedErrors() []error {
	rs := make([]refusal, 0, len(c.refused))
	for r := range c.refused {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].source != rs[j].source {
			return rs[i].source < rs[j].source
		}
		return rs[i].key.String() < rs[j].key.String()
	})
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = c.refused[r]
	}
	return errs
}

// checkEncodable refuses the output document of key when JSON cannot carry
// it: a NaN or ±Inf number (JSON, RFC 8259 §6, has none; the API server
// would refuse the write, and a view holding it would fail every list and
// watch of its kind) or a nesting deeper than encoding/json decodes (see
// object.ValidateEncodable). The error names the controller's pipeline,
// the target object and the field, e.g.
//
//	spec.controllers[0].pipeline: output Ratio default/bad is not written: status.ratio: Invalid value: NaN: not a valid JSON number ...
//
// The target object keeps the state last written until the output of its
// key changes; the error stays in PipelineError until then, and it is
// recorded (once per output) when record is set. The other target
// objects are not affected. A nil document (no output) passes.
func (c *Controller) checkEncodable(key object.Key, desired map[string]any, record bool) error {
	var err error
	if desired != nil {
		if errs := object.ValidateEncodable(desired, nil); len(errs) > 0 {
			err = fmt.Errorf("%s.pipeline: output %s %s is not written: %s", c.path, c.target.GVK.Kind, key, errs[0].Error())
		}
	}
	c.smu.Lock()
	if err == nil {
		delete(c.unencodable, key)
		c.smu.Unlock()
		return nil
	}
	c.unencodable[key] = err
	delete(c.failed, key) // a retry would write the same output
	c.smu.Unlock()
	if record {
		c.recordError("output", err)
	}
	return err
}

// unencodableErrors returns the errors of the outputs checkEncodable
// refused, in key order. Callers hold smu.
func (c *Controller) unencodableErrors() []error {
	keys := make(map[object.Key]bool, len(c.unencodable))
	for k := range c.unencodable {
		keys[k] = true
	}
	sorted := sortedKeys(keys)
	errs := make([]error, len(sorted))
	for i, k := range sorted {
		errs[i] = c.unencodable[k]
	}
	return errs
}

// sizeLimited refuses to send an object whose JSON encoding is over max
// bytes: the API server would refuse to store it. Patches are checked by
// their own size (the patched object is the server's to check).
type sizeLimited struct {
	Client
	max int
}

func (s sizeLimited) check(obj *unstructured.Unstructured) error {
	if n, ok := jsonSizeBound(obj.Object, s.max); ok && n <= s.max {
		return nil // far below the bound: no need to encode it
	}
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	return s.checkLen(obj.GetKind(), len(b))
}

func (s sizeLimited) checkLen(kind string, n int) error {
	if n <= s.max {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
		"the %s is %d bytes encoded as JSON, over the limit of %d bytes for one object (dctl --max-object-bytes); it was not sent", kind, n, s.max))
}

func (s sizeLimited) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Create(ctx, obj)
}

func (s sizeLimited) Update(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Update(ctx, obj)
}

func (s sizeLimited) Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string) error {
	if err := s.check(obj); err != nil {
		return err
	}
	return s.Client.Apply(ctx, obj, fieldManager)
}

func (s sizeLimited) Patch(ctx context.Context, gvk schema.GroupVersionKind, key object.Key, mergePatch []byte) error {
	if err := s.checkLen(gvk.Kind+" patch", len(mergePatch)); err != nil {
		return err
	}
	return s.Client.Patch(ctx, gvk, key, mergePatch)
}

// jsonSizeBound returns an upper bound of the length of v's JSON encoding
// (each string byte counted as the 6 of a \u escape, numbers at their
// longest), computed without encoding. ok is false for a value of another
// type than the unstructured model holds (maps, lists, strings, bool,
// int64, float64, nil), or as soon as the bound passes limit.
func jsonSizeBound(v any, limit int) (n int, ok bool) {
	var walk func(v any) bool
	walk = func(v any) bool {
		switch t := v.(type) {
		case nil:
			n += 4
		case bool:
			n += 5
		case string:
			n += 2 + 6*len(t)
		case int64:
			n += 20
		case float64:
			n += 25
		case map[string]any:
			n += 2
			for k, e := range t {
				n += 4 + 6*len(k) // quotes, colon and comma
				if !walk(e) {
					return false
				}
			}
		case []any:
			n += 2
			for _, e := range t {
				n++
				if !walk(e) {
					return false
				}
			}
		default:
			return false
		}
		return n <= limit
	}
	ok = walk(v)
	return n, ok
}

// sizeLimitedOffline is sizeLimited over a client without server-side
// apply.
type sizeLimitedOffline struct{ sizeLimited }

// NoServerSideApply marks a client without server-side apply.
func (sizeLimitedOffline) NoServerSideApply() {}

// limitSize wraps cl in the object size check of max bytes.
func limitSize(cl Client, max int) Client {
	s := sizeLimited{Client: cl, max: max}
	if _, offline := cl.(interface{ NoServerSideApply() }); offline {
		return sizeLimitedOffline{s}
	}
	return s
}
