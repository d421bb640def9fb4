package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
)

// ManagedMetadataAnnotation records what an Updater target's output set on
// the object, as JSON: {"labels":["tier"],"annotations":["note"],
// "output":"<digest>"} (keys sorted, empty lists omitted). The next write
// removes the keys listed here that the output no longer sets and keeps
// every other label and annotation, so that a key the output dropped goes
// away even after a manager restart. "output" is a digest of the output
// written last (native targets only): an object whose recorded digest
// differs from the current output's is replaced, so a field the output
// dropped while the manager was down goes too. On a view target the
// annotation is absent when the output sets no labels or annotations (views
// have no server defaults: their content is compared as a whole). The owner
// annotation and this annotation itself are never listed.
const ManagedMetadataAnnotation = "dcontroller.io/managed-metadata"

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

// managedKeys is the value of ManagedMetadataAnnotation.
type managedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
	Output      string   `json:"output,omitempty"`
}

func (m managedKeys) empty() bool {
	return len(m.Labels) == 0 && len(m.Annotations) == 0 && m.Output == ""
}

// withoutMetadata returns doc without its metadata.
func withoutMetadata(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// encode returns m's JSON as json.Marshal writes it. Keys and values that
// need no escaping (printable ASCII but for the quote, the backslash, '<',
// '>' and '&', as label and annotation keys are) are written directly,
// anything else goes through json.Marshal.
func (m managedKeys) encode() string {
	n := len(`{"labels":[],"annotations":[],"output":""}`) + len(m.Output)
	for _, k := range m.Labels {
		n += len(k) + 3
	}
	for _, k := range m.Annotations {
		n += len(k) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	ok := true
	list := func(name string, keys []string) {
		if len(keys) == 0 {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":[`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			ok = ok && plainJSONString(k)
			b = append(b, '"')
			b = append(b, k...)
			b = append(b, '"')
		}
		b = append(b, ']')
	}
	list("labels", m.Labels)
	list("annotations", m.Annotations)
	if m.Output != "" {
		if len(b) > 1 {
			b = append(b, ',')
		}
		ok = ok && plainJSONString(m.Output)
		b = append(b, `"output":"`...)
		b = append(b, m.Output...)
		b = append(b, '"')
	}
	b = append(b, '}')
	if !ok {
		b, _ = json.Marshal(m)
	}
	return string(b)
}

// plainJSONString reports whether json.Marshal writes s between quotes
// unchanged: printable ASCII without the quote, the backslash and the
// characters it escapes for HTML ('<', '>', '&').
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// parseManagedKeys reads ManagedMetadataAnnotation; a missing or malformed
// value is empty.
func parseManagedKeys(ann map[string]string) managedKeys {
	return parseManagedRecord(ann[ManagedMetadataAnnotation])
}

// parseManagedRecord reads a ManagedMetadataAnnotation value; an empty or
// malformed one is empty.
func parseManagedRecord(rec string) managedKeys {
	var m managedKeys
	if rec != "" {
		_ = json.Unmarshal([]byte(rec), &m)
	}
	return m
}

// metadataStrings returns metadata[field] of doc (labels or annotations) as
// Unstructured's GetLabels and GetAnnotations read it: null values read as
// "", and a map with a value that is not a string or null, or a field that
// is not a map, reads as nil. The map is doc's own when every value is a
// string (it must not be modified), a new one otherwise.
func metadataStrings(doc map[string]any, field string) map[string]any {
	meta, _ := doc["metadata"].(map[string]any)
	m, _ := meta[field].(map[string]any)
	for _, v := range m {
		if _, ok := v.(string); !ok {
			sm, found, err := unstructured.NestedNullCoercingStringMap(doc, "metadata", field)
			if err != nil || !found {
				return nil
			}
			out := make(map[string]any, len(sm))
			for k, v := range sm {
				out[k] = v
			}
			return out
		}
	}
	return m
}

// outputMetadataStrings returns metadata[field] of an output object about
// to be written (labels or annotations) as metadataStrings does, and
// normalizes it in doc as the API server would store it: a null map is
// removed, null values become "". A value that is neither a string nor
// null, or a field that is not a map, is an error naming it (the Kubernetes
// API types labels and annotations as maps of strings). doc must be the
// writer's own copy of the metadata map.
func outputMetadataStrings(doc map[string]any, field string) (map[string]any, error) {
	meta, _ := doc["metadata"].(map[string]any)
	v, ok := meta[field]
	if !ok {
		return nil, nil
	}
	if v == nil {
		delete(meta, field)
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("metadata.%s is %T, want a map of strings", field, v)
	}
	coerced := false
	for k, e := range m {
		switch e.(type) {
		case string:
		case nil:
			coerced = true
		default:
			return nil, fmt.Errorf("metadata.%s[%q] is %v (%T), want a string (quote it, or convert it with @string)", field, k, e, e)
		}
	}
	if coerced {
		m = metadataStrings(doc, field)
		meta[field] = m
	}
	return m, nil
}

func (m managedKeys) union(o managedKeys) managedKeys {
	return managedKeys{Labels: unionSorted(m.Labels, o.Labels), Annotations: unionSorted(m.Annotations, o.Annotations)}
}

func unionSorted(a, b []string) []string {
	set := map[string]bool{}
	for _, k := range a {
		set[k] = true
	}
	for _, k := range b {
		set[k] = true
	}
	return sortedStrings(set)
}

func sortedStrings(set map[string]bool) []string {
	if len(set) == 0 {
		return nil
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// outputKeys returns the label and annotation keys an output object sets
// (its labels and annotations), without the owner and managed-metadata
// annotations.
func outputKeys(outLabels, outAnns map[string]any) managedKeys {
	var m managedKeys
	if len(outLabels) > 0 {
		m.Labels = make([]string, 0, len(outLabels))
		for k := range outLabels {
			m.Labels = append(m.Labels, k)
		}
		sort.Strings(m.Labels)
	}
	for k := range outAnns {
		if k != opv1a1.OwnerAnnotation && k != ManagedMetadataAnnotation {
			m.Annotations = append(m.Annotations, k)
		}
	}
	sort.Strings(m.Annotations)
	return m
}

// keysOfRecord returns the label and annotation keys of rec, a
// ManagedMetadataAnnotation value this controller wrote, as
// parseManagedKeys does; cur are the keys of the record curRecord being
// written, which are reused when rec differs from it by the output digest
// alone.
func keysOfRecord(rec, curRecord string, cur managedKeys) managedKeys {
	if rec == "" {
		return managedKeys{}
	}
	if p, ok := recordLists(rec); ok {
		if q, ok := recordLists(curRecord); ok && p == q {
			return managedKeys{Labels: cur.Labels, Annotations: cur.Annotations}
		}
	}
	return parseManagedRecord(rec)
}

// recordLists returns the part of a record as managedKeys.encode writes it
// before its output digest (`{"labels":[...],` or `{`), ok when the rest
// is a digest of 16 hex digits and the closing brace.
func recordLists(rec string) (string, bool) {
	const field = `"output":"`
	i := strings.LastIndex(rec, field)
	if i < 0 {
		return "", false
	}
	rest := rec[i+len(field):]
	if len(rest) != 16+2 || rest[16:] != `"}` {
		return "", false
	}
	for j := 0; j < 16; j++ {
		if c := rest[j]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return rec[:i], true
}

// mergeManaged returns existing with the keys in prev that out no longer
// sets removed and out laid over it (nil when empty), as the value of a
// metadata map of an unstructured object, and the keys it removed that
// existing still had.
func mergeManaged(existing, out map[string]any, prev []string) (map[string]any, []string) {
	if len(existing) == 0 && len(out) == 0 {
		return nil, nil
	}
	var removed []string
	for _, k := range prev {
		if _, keep := out[k]; keep {
			continue
		}
		if _, ok := existing[k]; ok && !slices.Contains(removed, k) {
			removed = append(removed, k)
		}
	}
	// The merge is often one of the two maps as it is: return that one
	// rather than a copy (neither is modified by the callers).
	if coversKeys(out, existing, removed) {
		if len(out) == 0 {
			return nil, removed
		}
		return out, removed
	}
	if len(removed) == 0 && holdsStrings(existing, out) {
		return existing, nil
	}
	merged := make(map[string]any, len(existing)+len(out))
	for k, v := range existing {
		merged[k] = v
	}
	for k, v := range out {
		merged[k] = v
	}
	for _, k := range removed {
		delete(merged, k)
	}
	if len(merged) == 0 {
		merged = nil
	}
	return merged, removed
}

// coversKeys reports whether every key of existing is a key of out or one
// of removed.
func coversKeys(out, existing map[string]any, removed []string) bool {
	if len(existing) > len(out)+len(removed) {
		return false
	}
	for k := range existing {
		if _, ok := out[k]; !ok && !slices.Contains(removed, k) {
			return false
		}
	}
	return true
}

// holdsStrings reports whether existing has every key of out with the same
// string value.
func holdsStrings(existing, out map[string]any) bool {
	if len(out) > len(existing) {
		return false
	}
	for k, v := range out {
		s, ok := v.(string)
		if !ok {
			return false
		}
		if e, ok := existing[k].(string); !ok || e != s {
			return false
		}
	}
	return true
}

// OwnerConflictError is the error of an Updater write to an object that
// carries the owner annotation of another controller that still runs: the
// controller does not take the object over (two controllers writing one
// object would overwrite each other forever).
type OwnerConflictError struct {
	Kind  string
	Key   object.Key
	Owner string // the other controller, "<operator>/<controller>"
}

func (e *OwnerConflictError) Error() string {
	return fmt.Sprintf("%s %s is owned by %s (annotation %s); not taking it over while that controller runs", e.Kind, e.Key, e.Owner, opv1a1.OwnerAnnotation)
}

// ownerLive reports whether another owner still runs; see Options.OwnerLive.
func (c *Controller) ownerLive(owner string) bool {
	if c.opts.OwnerLive == nil {
		return true
	}
	return c.opts.OwnerLive(owner)
}

func (c *Controller) setConflict(key object.Key, owner string) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.conflicts == nil {
		c.conflicts = map[object.Key]string{}
	}
	if c.conflicts[key] != owner {
		c.opts.Logger.Info("target object owned by another controller; not taking it over", "kind", c.target.GVK.Kind, "key", key.String(), "owner", owner)
	}
	c.conflicts[key] = owner
}

func (c *Controller) clearConflict(key object.Key) {
	c.smu.Lock()
	defer c.smu.Unlock()
	delete(c.conflicts, key)
}

// OwnerConflict is a target object that another controller owns.
type OwnerConflict struct {
	Key   object.Key
	Owner string
}

// Conflicts returns the target objects this controller should write but
// leaves alone because another running controller owns them (see
// OwnerConflictError), sorted by key.
func (c *Controller) Conflicts() []OwnerConflict {
	c.smu.Lock()
	defer c.smu.Unlock()
	out := make([]OwnerConflict, 0, len(c.conflicts))
	for k, o := range c.conflicts {
		out = append(out, OwnerConflict{Key: k, Owner: o})
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
func (c *Controller) restoreWait(key object.Key, now time.Time) time.Duration {
	c.smu.Lock()
	defer c.smu.Unlock()
	s := c.restores[key]
	if s == nil || s.expired(now) {
		return 0
	}
	if w := s.last.Add(s.delay()).Sub(now); w > 0 {
		return w
	}
	return 0
}

// recordRestore counts a restore of key made at now.
func (c *Controller) recordRestore(key object.Key, now time.Time) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.restores == nil {
		c.restores = map[object.Key]*restoreState{}
	}
	s := c.restores[key]
	if s == nil || s.expired(now) {
		s = &restoreState{first: now}
		c.restores[key] = s
	}
	s.n++
	s.last = now
	if s.n == ContestedAfter {
		c.opts.Logger.Info("target object keeps being changed by another writer; restoring it with backoff", "kind", c.target.GVK.Kind, "key", key.String(), "restores", s.n)
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
func (c *Controller) Contested() []ContestedTarget {
	now := c.opts.Now()
	c.smu.Lock()
	defer c.smu.Unlock()
	var out []ContestedTarget
	for k, s := range c.restores {
		if s.expired(now) {
			delete(c.restores, k)
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

// gateKey carries, in a write's context, a check made before each API call.
type gateKey struct{}

// Tracks reports whether obj, an object of the target kind, is one this
// controller writes or waits to write: one it wrote (or patched), one whose
// write failed or is held back by an owner conflict or a restore backoff,
// or one that carries this controller's record: for an Updater of native
// objects its owner annotation, for a Patcher its PatchRecordAnnotation.
// The runtime calls it for every watch event of the target kind and calls
// RestoreTarget for the objects it tracks. It is cheap and does not wait
// for a running batch.
func (c *Controller) Tracks(obj *unstructured.Unstructured) bool {
	if obj == nil || obj.GroupVersionKind() != c.target.GVK {
		return false
	}
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	c.smu.Lock()
	written := c.targets[key].written.set
	tracked := written || c.failed[key] || c.conflicts[key] != "" || c.restores[key] != nil
	c.smu.Unlock()
	if tracked {
		return true
	}
	if c.target.Type == opv1a1.Patcher {
		_, ok := patchRecordOf(obj.Object, c.patchRecord)
		return ok
	}
	return c.target.Type == opv1a1.Updater && !c.target.IsView() &&
		obj.GetAnnotations()[opv1a1.OwnerAnnotation] == c.Owner()
}

// WrittenKeys returns the keys of the target objects the controller wrote
// and has not deleted since, in key order.
func (c *Controller) WrittenKeys() []object.Key {
	c.smu.Lock()
	keys := map[object.Key]bool{}
	for k, t := range c.targets {
		if t.written.set {
			keys[k] = true
		}
	}
	c.smu.Unlock()
	return sortedKeys(keys)
}

// Desires reports whether the controller's output has an object for key
// (which it writes, or keeps writing).
func (c *Controller) Desires(key object.Key) bool {
	doc, _ := c.desired(key)
	return doc != nil
}

// RestoreTarget checks the target object of key after a watch event on it
// and, when it differs from the desired state (deleted, or a field the
// target type owns changed), writes it back: an Updater recreates or
// replaces it, a Patcher re-applies its fields, an Applier re-applies. An
// object already in the desired state (the echo of the controller's own
// write) costs one read and no write. Repeated restores of one object back
// off (see RestoreBackoffInitial): when a restore must wait, RestoreTarget
// writes nothing and returns how long to wait before calling it again.
// A failed write is recorded and retried like any other (RetryFailed).
func (c *Controller) RestoreTarget(ctx context.Context, key object.Key) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	var wait time.Duration
	gate := func() error {
		if w := c.restoreWait(key, now); w > 0 {
			wait = w
			return errRestoreDeferred
		}
		return nil
	}
	wrote, err := c.syncKey(context.WithValue(ctx, gateKey{}, gate), key, false)
	if errors.Is(err, errRestoreDeferred) {
		return wait, nil
	}
	if wrote {
		c.recordRestore(key, now)
		c.opts.Logger.V(1).Info("target object restored", "kind", c.target.GVK.Kind, "key", key.String())
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
func (c *Controller) ConflictMessage() string {
	return describeKeys(c.target.GVK.Kind, c.Conflicts(),
		func(o OwnerConflict) string { return o.Key.String() },
		func(o OwnerConflict) string {
			return fmt.Sprintf("is owned by %s (annotation %s); not taking it over while that controller runs", o.Owner, opv1a1.OwnerAnnotation)
		})
}

// ContestedMessage words Contested for a status condition; "" when there
// are none. It does not change with every restore, only when the set of
// contested objects does.
func (c *Controller) ContestedMessage() string {
	return describeKeys(c.target.GVK.Kind, c.Contested(),
		func(t ContestedTarget) string { return t.Key.String() },
		func(ContestedTarget) string {
			return fmt.Sprintf("keeps being changed by another writer; restoring it with growing delays (up to %s)", RestoreBackoffMax)
		})
}
