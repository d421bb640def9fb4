package view

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// DefaultHistoryLimit is the number of change events a store keeps for
// watches that resume from a resourceVersion (see Options.HistoryLimit).
const DefaultHistoryLimit = 16384

// DefaultHistoryBytes bounds the estimated memory of the objects the watch
// history keeps (see Options.HistoryBytes): 64 MiB.
const DefaultHistoryBytes = 64 << 20

// DefaultHistoryAge is how long the watch history keeps a change (see
// Options.HistoryAge): 5 minutes, the interval at which kube-apiserver
// compacts etcd by default (--etcd-compaction-interval), so a client can
// resume a watch here about as long after a disconnection as it can from a
// Kubernetes API server.
const DefaultHistoryAge = 5 * time.Minute

// DefaultWatchQueueBytes bounds the estimated memory of the objects queued
// for one watcher that does not keep up (see Options.WatchQueueBytes):
// 64 MiB.
const DefaultWatchQueueBytes = 64 << 20

// Options configure a Store.
type Options struct {
	// HistoryLimit, HistoryBytes and HistoryAge bound the change events kept
	// for Watch to resume from an older resourceVersion: at most
	// HistoryLimit events, whose objects take at most HistoryBytes bytes
	// (estimated, see sizeOf), none older than HistoryAge. The oldest events
	// are dropped first; a watch from a version whose later events were
	// dropped fails with 410 Gone (Expired), and the client lists again.
	// Each is its default (DefaultHistoryLimit, DefaultHistoryBytes,
	// DefaultHistoryAge) when 0 or less.
	HistoryLimit int
	HistoryBytes int64
	HistoryAge   time.Duration
	// WatchQueueBytes bounds the estimated bytes of the changed objects
	// queued for one watcher (DefaultWatchQueueBytes when 0 or less); past
	// it, as past WatchOptions.QueueLimit events, the watch closes and
	// Watcher.Err is 410 Gone (Expired): the client lists again.
	// WatchOptions.QueueBytes overrides it.
	WatchQueueBytes int64
	// ServerMetadata makes the store act like an API server on metadata it
	// owns: Create sets metadata.uid (a random UUID) and
	// metadata.creationTimestamp when they are missing, Update keeps them
	// (and metadata.managedFields) from the stored object when the new one
	// lacks them and refuses a different uid with Conflict. Off by default,
	// so offline evaluation output stays deterministic.
	ServerMetadata bool
}

// withDefaults returns o with every unset bound at its default.
func (o Options) withDefaults() Options {
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	if o.HistoryBytes <= 0 {
		o.HistoryBytes = DefaultHistoryBytes
	}
	if o.HistoryAge <= 0 {
		o.HistoryAge = DefaultHistoryAge
	}
	if o.WatchQueueBytes <= 0 {
		o.WatchQueueBytes = DefaultWatchQueueBytes
	}
	return o
}

// Options returns the options of the store, defaults filled in.
func (s *Store) Options() Options {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.opts
}

// SetOptions changes the options of a store in use. Turning ServerMetadata
// on stamps the objects already stored that lack a uid or creation time,
// without a new resourceVersion or an event. Tighter history bounds drop
// the events past them at once; watchers already running keep the queue
// bound they started with.
func (s *Store) SetOptions(opts Options) {
	opts = opts.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.opts.ServerMetadata
	s.opts = opts
	s.history.setBounds(opts.HistoryLimit, opts.HistoryBytes, opts.HistoryAge)
	s.history.trim(time.Now())
	s.resetExpiry()
	if !opts.ServerMetadata {
		return
	}
	// ResourceVersions continue from a random epoch in the top bits
	// (epoch<<40, epoch in [1, 2²³)), so that a version another store
	// issued (a restarted manager, or another member of a ring that held
	// the views before a handover) lies outside this store's range, below
	// its history or above its latest, and a watch resumed from it answers
	// 410 Gone instead of replaying changes it does not follow from: the
	// client lists again, as Kubernetes API conventions ask of it. Two
	// stores share an epoch with probability 2⁻²³.
	if !was {
		if base := (rand.Int64N(1<<23-1) + 1) << 40; s.rv < base {
			s.rv = base
			s.history.compacted = base
		}
	}
	for _, objs := range s.objects {
		for key, obj := range objs {
			if ts := obj.GetCreationTimestamp(); obj.GetUID() == "" || ts.IsZero() {
				stamped := obj.DeepCopy()
				stampServerMetadata(stamped)
				objs[key] = stamped
			}
		}
	}
}

func stampServerMetadata(obj *unstructured.Unstructured) {
	if obj.GetUID() == "" {
		obj.SetUID(types.UID(uuid.NewString()))
	}
	if ts := obj.GetCreationTimestamp(); ts.IsZero() {
		obj.SetCreationTimestamp(metav1.NewTime(time.Now().UTC().Truncate(time.Second)))
	}
}

func keepServerMetadata(old, obj *unstructured.Unstructured) {
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ts, oldTS := obj.GetCreationTimestamp(), old.GetCreationTimestamp(); ts.IsZero() && !oldTS.IsZero() {
		obj.SetCreationTimestamp(oldTS)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "managedFields"); !ok {
		if mf, ok, _ := unstructured.NestedFieldNoCopy(old.Object, "metadata", "managedFields"); ok {
			_ = unstructured.SetNestedField(obj.Object, object.DeepCopy(mf), "metadata", "managedFields")
		}
	}
}

// ResourceVersion returns the store's current resourceVersion: the version
// of the latest change, "0" for a store that never changed.
func (s *Store) ResourceVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return strconv.FormatInt(s.rv, 10)
}

// ListOptions select objects of one kind, as a Kubernetes list does.
type ListOptions struct {
	// Namespace restricts the selection to one namespace; "" selects all.
	Namespace string
	// Labels selects by metadata.labels; nil selects everything.
	Labels labels.Selector
	// Fields selects by the fields of FieldSet; nil selects everything.
	Fields fields.Selector
}

// FieldSet returns the fields an object can be selected by with a field
// selector: metadata.name and metadata.namespace, the two every Kubernetes
// resource supports.
func FieldSet(obj *unstructured.Unstructured) fields.Set {
	return fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
}

// Matches reports whether obj is selected.
func (o ListOptions) Matches(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return false
	}
	return o.matches(obj, obj.GetLabels())
}

// matches reports whether obj would be selected with the labels lbls; the
// watch history keeps only the labels of an object's previous version, which
// is all that can differ in the selection of two versions of one object.
func (o ListOptions) matches(obj *unstructured.Unstructured, lbls map[string]string) bool {
	if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
		return false
	}
	if o.Labels != nil && !o.Labels.Empty() && !o.Labels.Matches(labels.Set(lbls)) {
		return false
	}
	if o.Fields != nil && !o.Fields.Empty() && !o.Fields.Matches(FieldSet(obj)) {
		return false
	}
	return true
}

// Select returns deep copies of the selected objects of a kind, sorted by
// namespace and name, and the store's resourceVersion at the time of the
// selection: a Watch from that version sees every later change.
func (s *Store) Select(gvk schema.GroupVersionKind, opts ListOptions) ([]*unstructured.Unstructured, string) {
	sel, rv := s.selectSorted(gvk, opts)
	out := make([]*unstructured.Unstructured, len(sel))
	for i, k := range sel {
		out[i] = k.obj.DeepCopy()
	}
	return out, rv
}

// selectSorted returns the stored objects of a kind that opts selects,
// sorted by namespace and name (not copies), and the store's
// resourceVersion at the time of the selection.
func (s *Store) selectSorted(gvk schema.GroupVersionKind, opts ListOptions) ([]keyed, string) {
	s.mu.RLock()
	sel := make([]keyed, 0, len(s.objects[gvk]))
	for key, obj := range s.objects[gvk] {
		if opts.Namespace != "" && key.Namespace != opts.Namespace {
			continue
		}
		if opts.Matches(obj) {
			sel = append(sel, keyed{key, obj})
		}
	}
	rv := strconv.FormatInt(s.rv, 10)
	s.mu.RUnlock()
	// Stored objects are never modified in place (a write replaces them),
	// so they are sorted (and copied, by Select) outside the lock.
	sortKeyed(sel)
	return sel, rv
}

type keyed struct {
	key object.Key
	obj *unstructured.Unstructured
}

func sortKeyed(objs []keyed) {
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].key.Namespace != objs[j].key.Namespace {
			return objs[i].key.Namespace < objs[j].key.Namespace
		}
		return objs[i].key.Name < objs[j].key.Name
	})
}

func sortObjects(objs []*unstructured.Unstructured) {
	sel := make([]keyed, len(objs))
	for i, o := range objs {
		sel[i] = keyed{object.Key{Namespace: o.GetNamespace(), Name: o.GetName()}, o}
	}
	sortKeyed(sel)
	for i := range sel {
		objs[i] = sel[i].obj
	}
}

// Preconditions must hold for DeleteIf to delete: an empty field is not
// checked. They follow metav1.Preconditions.
type Preconditions struct {
	UID             types.UID
	ResourceVersion string
}

// Check returns Conflict when obj does not satisfy the preconditions.
func (p Preconditions) Check(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	key := object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if p.UID != "" && p.UID != obj.GetUID() {
		return apierrors.NewConflict(gr(gvk), key.String(),
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", p.UID, obj.GetUID()))
	}
	if p.ResourceVersion != "" && p.ResourceVersion != obj.GetResourceVersion() {
		return apierrors.NewConflict(gr(gvk), key.String(),
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", p.ResourceVersion, obj.GetResourceVersion()))
	}
	return nil
}

// DeleteIf removes an object when the preconditions hold and returns its
// last state. Errors: NotFound, Conflict when a precondition fails.
func (s *Store) DeleteIf(gvk schema.GroupVersionKind, key object.Key, pre Preconditions) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	old, ok := s.objects[gvk][key]
	if !ok {
		s.mu.Unlock()
		return nil, apierrors.NewNotFound(gr(gvk), key.String())
	}
	if err := pre.Check(old); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	delete(s.objects[gvk], key)
	s.rv++
	s.record(Deleted, gvk, old, old)
	s.mu.Unlock()
	s.notify(Event{Type: Deleted, Object: old, Old: old})
	return old.DeepCopy(), nil
}

// DeleteCollection removes every selected object of a kind, one change (and
// one event) each, and returns their last states sorted by namespace and
// name.
func (s *Store) DeleteCollection(gvk schema.GroupVersionKind, opts ListOptions) []*unstructured.Unstructured {
	s.mu.Lock()
	var victims []*unstructured.Unstructured
	for _, obj := range s.objects[gvk] {
		if opts.Matches(obj) {
			victims = append(victims, obj)
		}
	}
	sortObjects(victims)
	for _, old := range victims {
		delete(s.objects[gvk], object.Key{Namespace: old.GetNamespace(), Name: old.GetName()})
		s.rv++
		s.record(Deleted, gvk, old, old)
	}
	s.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(victims))
	for _, old := range victims {
		s.notify(Event{Type: Deleted, Object: old, Old: old})
		out = append(out, old.DeepCopy())
	}
	return out
}
