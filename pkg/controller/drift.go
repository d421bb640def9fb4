package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// Restore backoff: a target object that is changed back by another writer
// is restored at once the first time; each further restore of the same
// object waits RestoreBackoffInitial, doubling up to RestoreBackoffMax. An
// object left alone for twice its current delay (at least RestoreQuiet)
// starts over.
const (
	RestoreBackoffInitial = time.Second
	RestoreBackoffMax     = 5 * time.Minute
	RestoreQuiet          = time.Minute
	// ContestedAfter is how many restores in a row, each within the quiet
	// window of the previous one, make a target object contested.
	ContestedAfter = 3
)

// OwnerConflictError is the error of an Updater write to an object that
// carries the owner annotation of another controller that still runs: the
// controller does not take the object over (two controllers writing one
// object would overwrite each other forever).
//
// A target with adoption Create refuses an existing object it did not
// create the same way: NotCreated then says how that shows (e.g.
// "carries no dcontroller.io/owner annotation"), and Owner is the owner
// annotation found ("" when none).
type OwnerConflictError struct {
	Kind       string
	Key        object.Key
	Owner      string // the other controller, "<operator>/<controller>"
	NotCreated string
}

func (e *OwnerConflictError) Error() string {
	return e.Kind + " " + e.Key.String() + " " + conflictWords(e.Owner, e.NotCreated)
}

// conflictWords says what is wrong with an object of an owner conflict.
func conflictWords(owner, notCreated string) string {
	if notCreated != "" {
		return fmt.Sprintf("exists and %s; with adoption Create the controller writes only objects it created", notCreated)
	}
	return fmt.Sprintf("is owned by %s (annotation %s); not taking it over while that controller runs", owner, opv1a1.OwnerAnnotation)
}

// ownerLive reports whether another owner still runs; see Options.OwnerLive.
func (t *Target) ownerLive(owner string) bool {
	if t.c.opts.OwnerLive == nil {
		return true
	}
	return t.c.opts.OwnerLive(owner)
}

func (t *Target) setConflict(key object.Key, e *OwnerConflictError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conflicts == nil {
		t.conflicts = map[object.Key]OwnerConflict{}
	}
	oc := OwnerConflict{Key: key, Owner: e.Owner, NotCreated: e.NotCreated}
	if prev, ok := t.conflicts[key]; !ok || prev != oc {
		t.c.opts.Logger.Info("target object owned by another controller, or not created by this one; not taking it over", "kind", t.GVK.Kind, "key", key.String(), "owner", e.Owner, "notCreated", e.NotCreated)
	}
	t.conflicts[key] = oc
}

func (t *Target) clearConflict(key object.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conflicts, key)
}

// OwnerConflict is a target object that another controller owns, or,
// for a target with adoption Create, that it did not create (NotCreated
// says how that shows; see OwnerConflictError).
type OwnerConflict struct {
	Key        object.Key
	Owner      string
	NotCreated string
}

// Conflicts returns the target objects this controller should write but
// leaves alone because another running controller owns them (see
// OwnerConflictError), sorted by key.
func (t *Target) Conflicts() []OwnerConflict {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]OwnerConflict, 0, len(t.conflicts))
	for _, oc := range t.conflicts {
		out = append(out, oc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// restoreState counts the restores of one target object.
type restoreState struct {
	n     int       // restores in a row, each within the quiet window of the previous
	first time.Time // the first of them
	last  time.Time // the latest
}

// delay is how long after the last restore the next one may be made.
func (s *restoreState) delay() time.Duration {
	if s == nil || s.n == 0 {
		return 0
	}
	d := RestoreBackoffInitial
	for i := 1; i < s.n && d < RestoreBackoffMax; i++ {
		d *= 2
	}
	if d > RestoreBackoffMax {
		d = RestoreBackoffMax
	}
	return d
}

// expired reports whether the object was left alone long enough to start over.
func (s *restoreState) expired(now time.Time) bool {
	quiet := 2 * s.delay()
	if quiet < RestoreQuiet {
		quiet = RestoreQuiet
	}
	return now.Sub(s.last) > quiet
}

// restoreWait returns how long the next restore of key must still wait.
func (t *Target) restoreWait(key object.Key, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.restores[key]
	if s == nil || s.expired(now) {
		return 0
	}
	if w := s.last.Add(s.delay()).Sub(now); w > 0 {
		return w
	}
	return 0
}

// recordRestore counts a restore of key made at now.
func (t *Target) recordRestore(key object.Key, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.restores == nil {
		t.restores = map[object.Key]*restoreState{}
	}
	s := t.restores[key]
	if s == nil || s.expired(now) {
		s = &restoreState{first: now}
		t.restores[key] = s
	}
	s.n++
	s.last = now
	if s.n == ContestedAfter {
		t.c.opts.Logger.Info("target object keeps being changed by another writer; restoring it with backoff", "kind", t.GVK.Kind, "key", key.String(), "restores", s.n)
	}
}

// ContestedTarget is a target object that another writer keeps changing.
type ContestedTarget struct {
	Key object.Key
	// Restores counts the restores in a row; Since is the first of them.
	Restores int
	Since    time.Time
	// NextDelay is how long after the last restore the next one waits.
	NextDelay time.Duration
}

// Contested returns the target objects that were restored ContestedAfter
// times or more in a row and were changed again within the quiet window,
// sorted by key. Expired entries are dropped.
func (t *Target) Contested() []ContestedTarget {
	now := t.c.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []ContestedTarget
	for k, s := range t.restores {
		if s.expired(now) {
			delete(t.restores, k)
			continue
		}
		if s.n >= ContestedAfter {
			out = append(out, ContestedTarget{Key: k, Restores: s.n, Since: s.first, NextDelay: s.delay()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out
}

// errRestoreDeferred stops a restore write that must wait for its backoff.
var errRestoreDeferred = errors.New("restore deferred by backoff")

// errRestoreCached stops the first look of a restore check, made on the
// informer cache, at its first write: the write is decided again on the
// object read from the API server (see RestoreTarget).
var errRestoreCached = errors.New("restore decided on the cached object")

// errRestoreGone ends a restore check of a Patcher target whose object no
// longer exists: a Patcher never creates, so there is nothing to restore
// and nothing to report (the ordinary write path reports a missing target
// the output still wants).
var errRestoreGone = errors.New("restore: target object gone")

// restoreStop reports whether err ends a restore check without an error.
func restoreStop(err error) bool {
	return errors.Is(err, errRestoreDeferred) || errors.Is(err, errRestoreCached) || errors.Is(err, errRestoreGone)
}

// gateKey carries, in a write's context, a check made before each API call.
type gateKey struct{}

// liveKey marks a write's context whose reads of the target object go to
// the API server (LiveReader) rather than the informer cache.
type liveKey struct{}

// restoring reports whether ctx is that of a restore check.
func restoring(ctx context.Context) bool {
	_, ok := ctx.Value(gateKey{}).(func() error)
	return ok
}

// Tracks reports whether obj, an object of the target kind, is one this
// controller writes or waits to write: one its output has (a Patcher's
// target deleted and created again is patched again), one it wrote (or
// patched), one whose write failed or is held back by an owner conflict or
// a restore backoff, or one that carries this controller's record: for an
// Updater of native objects its owner annotation, for a Patcher its
// PatchRecordAnnotation.
// The runtime calls it for every watch event of the target kind and calls
// RestoreTarget for the objects it tracks. It is cheap and does not wait
// for a running batch.
func (t *Target) Tracks(obj *unstructured.Unstructured) bool {
	if obj == nil || obj.GroupVersionKind() != t.GVK {
		return false
	}
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	t.mu.Lock()
	st := t.keys[key]
	_, conflict := t.conflicts[key]
	tracked := st.written.set || !st.out.empty() || t.failed[key] || conflict || t.restores[key] != nil
	t.mu.Unlock()
	if tracked {
		return true
	}
	if t.Type == opv1a1.Patcher {
		_, ok := patchRecordOf(obj.Object, t.patchRecord)
		return ok
	}
	return t.Type == opv1a1.Updater && !t.IsView() &&
		obj.GetAnnotations()[opv1a1.OwnerAnnotation] == t.owner
}

// RestoreTarget checks the target object of key after a watch event on it
// and, when it differs from the desired state (deleted, or a field the
// target type owns changed), writes it back: an Updater recreates or
// replaces it, a Patcher re-applies its fields, an Applier re-applies. An
// object already in the desired state (the echo of the controller's own
// write) costs one read and no write.
//
// The object is read first from the Client's Get, which may serve an
// informer cache that still holds an earlier write of the controller
// while its output, and its last write, moved on (the watch event is the
// echo of that earlier write). When that read calls for a write and the
// Client is a LiveReader, the object is read again from the API server
// and the write is decided on that: the echo of an earlier write of the
// controller is no change by another writer, so it writes nothing and
// counts no restore. Only a write made on the API server's state, of a
// key whose last write did not fail, counts as a restore.
//
// Repeated restores of one object back off (see RestoreBackoffInitial):
// when a restore must wait, RestoreTarget writes nothing and returns how
// long to wait before calling it again. A Patcher target whose object was
// deleted is not restored (a Patcher never creates objects) and no error
// is recorded for it. A failed write is recorded and retried like any
// other (RetryFailed).
func (t *Target) RestoreTarget(ctx context.Context, key object.Key) (time.Duration, error) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	now := t.c.opts.Now()
	t.mu.Lock()
	retry := t.failed[key]
	t.mu.Unlock()
	if _, ok := t.client.(LiveReader); ok {
		cached := func() error { return errRestoreCached }
		_, err := t.syncKey(context.WithValue(ctx, gateKey{}, cached), key, false)
		if !errors.Is(err, errRestoreCached) {
			if restoreStop(err) {
				return 0, nil
			}
			// Nothing to write (no API call was made), or an error
			// (recorded).
			return 0, err
		}
		ctx = context.WithValue(ctx, liveKey{}, true)
	}
	var wait time.Duration
	gate := func() error {
		if w := t.restoreWait(key, now); w > 0 {
			wait = w
			return errRestoreDeferred
		}
		return nil
	}
	wrote, err := t.syncKey(context.WithValue(ctx, gateKey{}, gate), key, false)
	if errors.Is(err, errRestoreDeferred) {
		return wait, nil
	}
	if restoreStop(err) {
		return 0, nil
	}
	if wrote && !retry {
		t.recordRestore(key, now)
		t.c.opts.Logger.V(1).Info("target object restored", "kind", t.GVK.Kind, "key", key.String())
	}
	return 0, err
}

// describeKeys words a list of target objects for a status condition: the
// first one, what is wrong with it, and how many more there are.
func describeKeys[T any](kind string, items []T, name func(T) string, what func(T) string) string {
	if len(items) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", kind, name(items[0]), what(items[0]))
	if len(items) > 1 {
		fmt.Fprintf(&b, " (and %d more)", len(items)-1)
	}
	return b.String()
}

// ConflictMessage words Conflicts for a status condition: the first object
// and its owner, and how many more there are; "" when there are none.
func (t *Target) ConflictMessage() string {
	return describeKeys(t.GVK.Kind, t.Conflicts(),
		func(o OwnerConflict) string { return o.Key.String() },
		func(o OwnerConflict) string { return conflictWords(o.Owner, o.NotCreated) })
}

// ContestedMessage words Contested for a status condition; "" when there
// are none. It does not change with every restore, only when the set of
// contested objects does.
func (t *Target) ContestedMessage() string {
	return describeKeys(t.GVK.Kind, t.Contested(),
		func(t ContestedTarget) string { return t.Key.String() },
		func(ContestedTarget) string {
			return fmt.Sprintf("keeps being changed by another writer; restoring it with growing delays (up to %s)", RestoreBackoffMax)
		})
}

// resync repairs the target's drift: it rewrites every desired target
// object whose current state differs; an Updater of native objects deletes
// the objects that carry its owner annotation but are no longer in the
// pipeline output, and a Patcher removes the fields the
// PatchRecordAnnotation of an object lists when the output has nothing for
// that object any more. It never touches objects it did not write. With
// skipWritten, keys whose last write succeeded are left out (see
// Controller.ResyncRest). The caller holds the controller's mu.
func (t *Target) resync(ctx context.Context, skipWritten bool) []error {
	var errs []error
	keys := map[object.Key]bool{}
	t.mu.Lock()
	for k, st := range t.keys {
		if !st.out.empty() {
			keys[k] = true
		}
	}
	for k := range t.failed {
		keys[k] = true
	}
	t.mu.Unlock()
	if t.Type == opv1a1.Updater && !t.IsView() {
		existing, err := t.client.List(ctx, t.GVK)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: list %s: %w", t.Path, t.GVK.Kind, err))
		}
		for _, obj := range existing {
			if t.c.opts.Scope != nil && !t.c.opts.Scope(obj.GetNamespace()) {
				// Another member's namespace.
				continue
			}
			if obj.GetAnnotations()[opv1a1.OwnerAnnotation] == t.owner {
				keys[object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = true
			}
		}
	}
	if t.Type == opv1a1.Patcher {
		// Objects that carry this target's record, the output for them
		// gone (before a restart, say): the fields it lists go.
		existing, err := t.client.List(ctx, t.GVK)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: list %s: %w", t.Path, t.GVK.Kind, err))
		}
		for _, obj := range existing {
			if t.c.opts.Scope != nil && !t.c.opts.Scope(obj.GetNamespace()) {
				continue
			}
			if _, ok := patchRecordOf(obj.Object, t.patchRecord); ok {
				keys[object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = true
			}
		}
	}
	if skipWritten {
		t.mu.Lock()
		for k := range keys {
			if t.keys[k].written.set && !t.failed[k] {
				delete(keys, k)
			}
		}
		t.mu.Unlock()
	}
	sorted := sortedKeys(keys)
	if t.Type != opv1a1.Patcher {
		for _, k := range sorted {
			// Forget what was written so the write compares with the live
			// state (the Updater's record is on the object). A Patcher
			// keeps its record: it knows which fields are its own only
			// from it.
			t.delWritten(k)
		}
	}
	return append(errs, t.syncAll(ctx, sorted)...)
}
