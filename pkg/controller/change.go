package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/pipeline"
)

// This file is the path of a change: a batch of object changes becomes one
// delta per source kind (deltasOf, with the undo of its input map), the
// pipeline runs once (runPipeline), a change over MaxDeltaEntries is split
// off and refused (handleBatch), and the output deltas go to the targets by
// name (writeOutputs), each of which writes its own objects (target.go).

// Start emits the single empty object of each OneShot source.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled != nil {
		return c.cancelled
	}
	deltas := map[string]*dbsp.ZSet{}
	for _, s := range c.sources {
		if s.Type != opv1a1.OneShot {
			continue
		}
		z := dbsp.NewZSet()
		z.Insert(map[string]any{"apiVersion": s.GVK.GroupVersion().String(), "kind": s.GVK.Kind, "metadata": map[string]any{}}, 1)
		deltas[s.GVK.Kind] = z
	}
	if len(deltas) == 0 {
		return nil
	}
	return c.process(ctx, deltas)
}

// process runs deltas through the pipeline outside a batch of changes
// (Start's OneShot objects) and writes the outputs; a change over
// MaxDeltaEntries is refused whole.
func (c *Controller) process(ctx context.Context, deltas map[string]*dbsp.ZSet) error {
	outs, perr := c.runPipeline(ctx, deltas)
	if c.cancelled != nil {
		return c.cancelled
	}
	c.smu.Lock()
	c.pipelineErr = perr
	c.smu.Unlock()
	var le *pipeline.LimitError
	if errors.As(perr, &le) {
		c.recordError("pipeline", perr)
		return perr
	}
	return errors.Join(append([]error{perr}, c.writeOutputs(ctx, outs)...)...)
}

// Handle processes one change; see HandleBatch.
func (c *Controller) Handle(ctx context.Context, old, new *unstructured.Unstructured) error {
	return c.HandleBatch(ctx, []Change{{Old: old, New: new}})
}

// HandleBatch never modifies the objects in changes and keeps references to
// them (and to their maps) until they are replaced: callers may pass the
// objects of an informer cache without copying them, as long as nobody
// modifies those. It turns changes into one
// delta per source kind (an update is the old document with weight -1 and
// the new one with +1; objects leaving a source's namespace or selector are
// removals), runs the pipeline once and writes the touched target objects.
// Objects that belong to no source are ignored; the pipeline sees source
// objects without metadata.managedFields. Errors are returned joined and recorded in
// Errors.
//
// A change for which a pipeline stage would emit more than MaxDeltaEntries
// entries is refused: the batch is split until that change is alone, the
// other changes are processed, and for the refused one the pipeline state,
// the input objects and the outputs stay as they were, so later changes
// compute on the last good state. The refusal is returned, recorded in
// Errors and reported by PipelineError until the object changes again.
//
// When ctx ends while the pipeline runs (the operator is deleted or
// replaced), the evaluation in progress stops within about a thousand
// steps (see expression.Budget), nothing is written and the error, which
// wraps ctx's, is returned; the controller is then stopped for good: its
// pipeline state misses the batch, so HandleBatch and Start return that
// error from then on.
func (c *Controller) HandleBatch(ctx context.Context, changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled != nil {
		return c.cancelled
	}
	ran, perrs, werrs := c.handleBatch(ctx, changes, true)
	if !ran {
		return nil
	}
	perr := errors.Join(perrs...)
	c.smu.Lock()
	c.pipelineErr = perr
	c.smu.Unlock()
	return errors.Join(append([]error{perr}, werrs...)...)
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
		return true, perrs, c.writeOutputs(ctx, out)
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

// runPipeline runs one incremental pipeline step and returns its output
// deltas by target name; errors other than a *pipeline.LimitError are
// recorded. A run cancelled by ctx sets c.cancelled and returns its error,
// unrecorded, and no output. The pipeline's outputs are the targets' names
// (a plain pipeline has one, the controller's only target).
func (c *Controller) runPipeline(ctx context.Context, deltas map[string]*dbsp.ZSet) (map[string]*dbsp.ZSet, error) {
	start := time.Now()
	outs, perr := c.pipe.ProcessOutputs(ctx, deltas)
	if cerr := ctx.Err(); cerr != nil && errors.Is(perr, cerr) {
		c.cancelled = fmt.Errorf("controller %s stopped: its pipeline run was cancelled: %w", c.name, cerr)
		c.opts.Logger.Info("pipeline run cancelled", "error", perr.Error())
		return nil, c.cancelled
	}
	PipelineSeconds.WithLabelValues(c.opts.Operator, c.name).Observe(time.Since(start).Seconds())
	var le *pipeline.LimitError
	if perr != nil && !errors.As(perr, &le) {
		c.recordError("pipeline", perr)
	}
	if outs == nil {
		return nil, perr
	}
	n := 0
	for _, out := range outs {
		n += out.Len()
	}
	DeltasOut.WithLabelValues(c.opts.Operator, c.name).Add(float64(n))
	return outs, perr
}

// writeOutputs hands each output delta to the target of its name, in the
// targets' spec order, and returns the errors of their writes. Each target
// folds its delta into its outputs and writes the objects it touched (see
// Target.applyOutput); the controller does not know how.
func (c *Controller) writeOutputs(ctx context.Context, outs map[string]*dbsp.ZSet) []error {
	var errs []error
	for _, t := range c.targets {
		if out := outs[t.Name]; out != nil {
			errs = append(errs, t.applyOutput(ctx, out)...)
		}
	}
	return errs
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

// refusal is a change the controller refused because a pipeline stage
// would emit too many entries for it; the controller keeps the previous
// state of the object until it changes again.
type refusal struct {
	source int
	key    object.Key
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
