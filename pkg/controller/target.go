package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// Target is one resolved target of a controller and everything the
// controller keeps of it: the integrated pipeline output by object key, the
// write path of its type (updater.go, patcher.go, applier.go), the record
// of what it wrote (written.go, managed.go, patchrecord.go), its drift
// repair (drift.go), the keys whose last write failed and its counters.
// The Controller routes each pipeline output to the target of its name and
// knows nothing of how a target writes. Its methods are safe for
// concurrent use.
type Target struct {
	// Name is the target's name, unique within its controller: the spec's
	// name field, else its kind. Pipeline outputs are routed by it.
	Name string
	GVK  schema.GroupVersionKind
	Type opv1a1.TargetType
	// Status: the kind has the status subresource (Options.HasStatus), so
	// the API server ignores status on the main endpoint and the target
	// writes an output's status through .../status (status.go). Never set
	// for a view.
	Status bool
	// Path is the spec path of the target, e.g. spec.controllers[0].target
	// or spec.controllers[0].targets[1].
	Path string

	c      *Controller // the controller that holds the target
	client Client      // Options.Client, size-limited for native kinds
	// owner is the owner annotation value of the native objects an Updater
	// creates (see Owner).
	owner string
	// patchRecord is the PatchRecordAnnotation key of a Patcher target
	// ("" for the other target types).
	patchRecord string

	mu sync.Mutex // guards the fields below (writes run concurrently)
	// keys holds per target key the integrated pipeline output and the
	// state last written (one map rather than two: most keys have both).
	keys   map[object.Key]targetState
	failed map[object.Key]bool // target keys whose last write failed
	// conflicts: target keys owned by another running controller, or not
	// created by this one (adoption Create).
	conflicts map[object.Key]OwnerConflict
	// restores: target keys restored after changes by another writer.
	restores map[object.Key]*restoreState
	// unencodable holds the target keys whose output JSON cannot carry (a
	// NaN or ±Inf number), until their output changes; see checkEncodable.
	unencodable map[object.Key]error
	counters    opv1a1.Counters // Writes and WriteErrors
	pol         policies        // externalFields, deletionPolicy, adoption (policy.go)
}

// newTarget returns the target of controller c whose resolved kind is gvk
// and whose type is typ ("" is Updater); path is its spec path.
func newTarget(c *Controller, name string, gvk schema.GroupVersionKind, typ opv1a1.TargetType, path string) (*Target, error) {
	t := &Target{
		Name: name, GVK: gvk, Type: typ, Path: path,
		c: c, client: c.opts.Client, owner: c.owner,
		keys:        map[object.Key]targetState{},
		failed:      map[object.Key]bool{},
		unencodable: map[object.Key]error{},
	}
	if t.Type == "" {
		t.Type = opv1a1.Updater
	}
	if name != gvk.Kind {
		// A named target: its own owner and record, apart from a target
		// of the same kind (named by its kind) of the controller.
		t.owner += "/" + name
	}
	switch t.Type {
	case opv1a1.Patcher:
		t.patchRecord = PatchRecordAnnotation(c.opts.Operator, c.name)
		if name != gvk.Kind {
			t.patchRecord = PatchRecordAnnotation(c.opts.Operator, c.name+"/"+name)
		}
	case opv1a1.Updater, opv1a1.Applier:
	default:
		return nil, fmt.Errorf("%s.type: unknown target type %q (want Updater, Patcher or Applier)", path, typ)
	}
	if !t.IsView() && c.opts.HasStatus != nil {
		var err error
		if t.Status, err = c.opts.HasStatus(gvk); err != nil {
			return nil, fmt.Errorf("%s: status subresource: %w", path, err)
		}
	}
	if max := limitOf(c.opts.MaxObjectBytes, DefaultMaxObjectBytes); max > 0 && !t.IsView() && t.client != nil {
		t.client = limitSize(t.client, max)
	}
	return t, nil
}

// IsView reports whether the target is a view.
func (t *Target) IsView() bool { return opv1a1.IsViewGroup(t.GVK.Group) }

// Owner returns the value of the owner annotation the target puts on the
// native objects an Updater creates: "<operator>/<controller>" for a
// target named by its kind, "<operator>/<controller>/<name>" for one with
// another name (two targets of one kind then own their objects apart).
func (t *Target) Owner() string { return t.owner }

// Counters returns the target's write counters (Writes, WriteErrors).
func (t *Target) Counters() opv1a1.Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.counters
}

// Pending returns how many of the target's keys wait for a retried write.
func (t *Target) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.failed)
}

// failedKeys returns the keys whose last write failed, in key order.
func (t *Target) failedKeys() []object.Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sortedKeys(t.failed)
}

// applyOutput adds the pipeline's output delta for this target to its
// outputs and writes the touched target objects. Removals are added first,
// so that an updated output replaces its old version in place (see
// outputSet); otherwise the order does not matter (Z-set addition
// commutes), so the delta is walked unsorted and only the outputs without
// a key are ordered, canonically, for their errors.
func (t *Target) applyOutput(ctx context.Context, out *dbsp.ZSet) []error {
	if out == nil {
		return nil
	}
	var keyless []dbsp.Entry
	touched := make(map[object.Key]bool, out.Len())
	for _, removals := range [2]bool{true, false} {
		out.Range(func(doc dbsp.Document, weight int) bool {
			if (weight < 0) != removals {
				return true
			}
			key, err := object.KeyOf(doc)
			if err != nil {
				keyless = append(keyless, dbsp.Entry{Doc: doc, Weight: weight})
				return true
			}
			t.mu.Lock()
			st := t.keys[key]
			st.out.insert(doc, weight)
			t.putKey(key, st)
			t.mu.Unlock()
			touched[key] = true
			return true
		})
	}
	var errs []error
	slices.SortFunc(keyless, func(a, b dbsp.Entry) int {
		if c := cmp.Compare(min(a.Weight, 0), min(b.Weight, 0)); c != 0 {
			return c
		}
		return dbsp.Compare(a.Doc, b.Doc)
	})
	for _, e := range keyless {
		_, err := object.KeyOf(e.Doc)
		err = fmt.Errorf("%s.pipeline: output %s (a pipeline builds a new object: set metadata.name in its last @project, or start a list-form @project with {\"$.\": \"$.\"} to keep the input object)", t.c.path, err)
		t.c.recordError("output", err)
		errs = append(errs, err)
	}
	return append(errs, t.syncAll(ctx, sortedKeys(touched))...)
}

// maxConflictRetries bounds the immediate retries of a write that hit a
// resourceVersion conflict; each retry reads fresh state.
const maxConflictRetries = 5

// targetState is what a controller keeps of one target key.
type targetState struct {
	out     outputSet
	written writtenState
}

// putKey stores the state of key, or drops it when it holds nothing.
// Callers hold mu.
func (t *Target) putKey(key object.Key, st targetState) {
	if st.out.empty() && !st.written.set {
		delete(t.keys, key)
		return
	}
	t.keys[key] = st
}

// desired returns the one positive-weight output document for key, or nil
// when the output has none.
func (t *Target) desired(key object.Key) (map[string]any, error) {
	t.mu.Lock()
	o := t.keys[key].out
	t.mu.Unlock()
	if o.empty() {
		return nil, nil
	}
	if o.more == nil {
		if o.one.Weight > 0 {
			return o.one.Doc, nil
		}
		return nil, nil
	}
	var docs []map[string]any
	for _, e := range o.entries() { // deterministic order
		if e.Weight > 0 {
			docs = append(docs, e.Doc)
		}
	}
	if len(docs) == 0 {
		return nil, nil
	}
	doc := docs[len(docs)-1]
	if len(docs) > 1 {
		return doc, fmt.Errorf("%s.pipeline: %d different outputs for %s %s; writing one of them", t.c.path, len(docs), t.GVK.Kind, key)
	}
	return doc, nil
}

func sortedKeys(m map[object.Key]bool) []object.Key {
	keys := make([]object.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) < 2 {
		return keys
	}
	// By Key.String, each key rendered once.
	strs := make([]string, len(keys))
	idx := make([]int, len(keys))
	for i, k := range keys {
		strs[i], idx[i] = k.String(), i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(strs[a], strs[b]) })
	out := make([]object.Key, len(keys))
	for i, j := range idx {
		out[i] = keys[j]
	}
	return out
}

// sync writes the desired state of one target key, retrying conflicts with
// fresh state; a failure marks the key for RetryFailed. Syncs of different
// keys may run concurrently.
func (t *Target) sync(ctx context.Context, key object.Key) error {
	_, err := t.syncKey(ctx, key, true)
	return err
}

// syncKey is sync; it reports whether a write was made. recordOutput says
// whether an ambiguous output is recorded as an error (restores do not
// record it again). An owner conflict is not an error: it is kept in
// Conflicts until the object can be written.
func (t *Target) syncKey(ctx context.Context, key object.Key, recordOutput bool) (bool, error) {
	if t.c.opts.Scope != nil && !t.c.opts.Scope(key.Namespace) {
		err := &OutOfScopeError{Kind: t.GVK.Kind, Key: key}
		if recordOutput {
			t.c.recordError("output", err)
		}
		return false, err
	}
	desired, derr := t.desired(key)
	if derr != nil && recordOutput {
		t.c.recordError("output", derr)
	}
	if !recordOutput {
		derr = nil
	}
	if err := t.checkEncodable(key, desired, recordOutput); err != nil {
		if !recordOutput {
			return false, nil
		}
		return false, errors.Join(derr, err)
	}
	var err error
	var wrote bool
	ctx = t.writeContext(ctx)
	for attempt := 0; attempt < maxConflictRetries; attempt++ {
		wrote, err = t.write(ctx, key, desired)
		var conflict *OwnerConflictError
		if errors.As(err, &conflict) {
			t.setConflict(key, conflict)
			t.mu.Lock()
			delete(t.failed, key)
			t.mu.Unlock()
			return false, derr
		}
		if restoreStop(err) {
			return false, err
		}
		if err == nil {
			t.clearConflict(key)
			if wrote {
				t.mu.Lock()
				t.counters.Writes++
				t.mu.Unlock()
			} else {
				TargetSkipped.WithLabelValues(t.c.opts.Operator, t.c.name).Inc()
			}
		}
		if err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			break
		}
		// A conflict is retried with fresh state: it is no write error
		// unless the last attempt fails too (counted and recorded below,
		// with its message).
	}
	t.mu.Lock()
	if err == nil {
		delete(t.failed, key)
		t.mu.Unlock()
		return wrote, derr
	}
	t.failed[key] = true
	if ctx.Err() != nil {
		// Shutting down: the write is retried after the next start.
		t.mu.Unlock()
		return false, nil
	}
	t.counters.WriteErrors++
	t.mu.Unlock()
	err = fmt.Errorf("%s: %s %s: %w%s", t.Path, t.GVK.Kind, key, err, invalidNameHint(err))
	t.c.recordError("write", err)
	return false, errors.Join(derr, err)
}

// syncAll syncs keys, up to Options.Concurrency at a time: that many
// workers take the keys in order (one goroutine per worker, not per key,
// so a large batch does not grow a fresh stack for every write).
func (t *Target) syncAll(ctx context.Context, keys []object.Key) []error {
	n := min(t.c.opts.Concurrency, len(keys))
	if n <= 1 {
		var errs []error
		for _, k := range keys {
			if err := t.sync(ctx, k); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	var (
		wg   sync.WaitGroup
		emu  sync.Mutex
		errs []error
		next atomic.Int64
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				if err := t.sync(ctx, keys[i]); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// call runs one target API call and counts it by operation and result. A
// gate in ctx (see RestoreTarget) may hold the call back.
func (t *Target) call(ctx context.Context, op string, f func() error) error {
	if gate, ok := ctx.Value(gateKey{}).(func() error); ok {
		if err := gate(); err != nil {
			return err
		}
	}
	err := f()
	result := "success"
	if err != nil {
		result = "error"
	}
	TargetWrites.WithLabelValues(t.c.opts.Operator, t.c.name, op, result).Inc()
	return err
}

// write moves the target object of key to the desired state; it reports
// whether an API call was made. A desired object that asks to keep the
// existing one (KeepsExisting) is no write of any kind.
func (t *Target) write(ctx context.Context, key object.Key, desired map[string]any) (bool, error) {
	if KeepsExisting(desired) {
		return false, nil
	}
	switch t.Type {
	case opv1a1.Patcher:
		return t.patch(ctx, key, desired)
	case opv1a1.Applier:
		if _, offline := t.client.(interface{ NoServerSideApply() }); offline || t.IsView() {
			// Without an API server there is no schema to merge lists by key:
			// apply the fields as a Patcher would.
			return t.patchOrCreate(ctx, key, desired)
		}
		return t.apply(ctx, key, desired)
	default:
		return t.update(ctx, key, desired)
	}
}

// KeepsExisting reports whether the output document doc carries
// opv1a1.KeepAnnotation with opv1a1.KeepValue: the target keeps the
// existing object of its key as it is (no create, update, patch or
// delete) and its record of it. A nil doc does not.
func KeepsExisting(doc map[string]any) bool {
	meta, ok := doc["metadata"].(map[string]any)
	if !ok {
		return false
	}
	ann, ok := meta["annotations"].(map[string]any)
	return ok && ann[opv1a1.KeepAnnotation] == opv1a1.KeepValue
}

// get reads the target object of key, nil when it does not exist: with
// Client.Get, or, in a restore check's second look (liveKey), from the API
// server through the Client's LiveReader.
func (t *Target) get(ctx context.Context, key object.Key) (*unstructured.Unstructured, error) {
	var existing *unstructured.Unstructured
	var err error
	if lr, ok := t.client.(LiveReader); ok && ctx.Value(liveKey{}) != nil {
		existing, err = lr.GetLive(ctx, t.GVK, key)
	} else {
		existing, err = t.client.Get(ctx, t.GVK, key)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return existing, err
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
func (t *Target) checkEncodable(key object.Key, desired map[string]any, record bool) error {
	var err error
	if desired != nil {
		if errs := object.ValidateEncodable(desired, nil); len(errs) > 0 {
			err = fmt.Errorf("%s.pipeline: output %s %s is not written: %s", t.c.path, t.GVK.Kind, key, errs[0].Error())
		}
	}
	t.mu.Lock()
	if err == nil {
		delete(t.unencodable, key)
		t.mu.Unlock()
		return nil
	}
	t.unencodable[key] = err
	delete(t.failed, key) // a retry would write the same output
	t.mu.Unlock()
	if record {
		t.c.recordError("output", err)
	}
	return err
}

// unencodableErrors returns the errors of the outputs checkEncodable
// refused, in key order. Callers hold smu.
func (t *Target) unencodableErrors() []error {
	keys := make(map[object.Key]bool, len(t.unencodable))
	for k := range t.unencodable {
		keys[k] = true
	}
	sorted := sortedKeys(keys)
	errs := make([]error, len(sorted))
	for i, k := range sorted {
		errs[i] = t.unencodable[k]
	}
	return errs
}

// WrittenKeys returns the keys of the target objects the controller wrote
// and has not deleted since, in key order.
func (t *Target) WrittenKeys() []object.Key {
	t.mu.Lock()
	keys := map[object.Key]bool{}
	for k, st := range t.keys {
		if st.written.set {
			keys[k] = true
		}
	}
	t.mu.Unlock()
	return sortedKeys(keys)
}

// Desires reports whether the controller's output has an object for key
// (which it writes, or keeps writing).
func (t *Target) Desires(key object.Key) bool {
	doc, _ := t.desired(key)
	return doc != nil
}
