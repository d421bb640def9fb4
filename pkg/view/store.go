package view

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// EventType is the type of a change notification, as in Kubernetes watch events.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is a change notification. Object is the new state (the last state for
// Deleted); Old is the previous state for Modified and Deleted. Both are the
// store's own objects, shared with every handler and the watch history: a
// handler must not modify them (copy first, e.g. with DeepCopy).
type Event struct {
	Type   EventType
	Object *unstructured.Unstructured
	Old    *unstructured.Unstructured
}

// Handler receives change notifications. It is called synchronously, after
// the change is committed and outside the store's lock.
type Handler func(Event)

// Store is an in-memory object store. It is safe for concurrent use.
type Store struct {
	mu       sync.RWMutex
	rv       int64
	objects  map[schema.GroupVersionKind]map[object.Key]*unstructured.Unstructured
	handlers map[int]Handler
	nextID   int

	opts     Options
	history  history
	expiry   *time.Timer // drops aged history entries; nil when not armed
	watchers map[schema.GroupVersionKind]map[*Watcher]struct{}
}

// NewStore returns an empty store with default Options.
func NewStore() *Store {
	return NewStoreWithOptions(Options{})
}

// NewStoreWithOptions returns an empty store.
func NewStoreWithOptions(opts Options) *Store {
	s := &Store{
		objects:  map[schema.GroupVersionKind]map[object.Key]*unstructured.Unstructured{},
		handlers: map[int]Handler{},
		watchers: map[schema.GroupVersionKind]map[*Watcher]struct{}{},
	}
	s.SetOptions(opts)
	return s
}

// Subscribe registers h for every change; the returned function unregisters it.
func (s *Store) Subscribe(h Handler) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.handlers[id] = h
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.handlers, id)
	}
}

func (s *Store) notify(ev Event) {
	s.mu.RLock()
	ids := make([]int, 0, len(s.handlers))
	for id := range s.handlers {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	hs := make([]Handler, 0, len(ids))
	for _, id := range ids {
		hs = append(hs, s.handlers[id])
	}
	s.mu.RUnlock()
	for _, h := range hs {
		h(ev)
	}
}

func gr(gvk schema.GroupVersionKind) schema.GroupResource {
	return schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
}

func keyOf(obj *unstructured.Unstructured) (schema.GroupVersionKind, object.Key, error) {
	gvk := obj.GroupVersionKind()
	if gvk.Kind == "" {
		return gvk, object.Key{}, fmt.Errorf("object has no kind")
	}
	if obj.GetName() == "" {
		return gvk, object.Key{}, fmt.Errorf("%s object has no metadata.name", gvk.Kind)
	}
	return gvk, object.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, nil
}

// checkEncodable refuses an object that JSON cannot carry: a NaN or ±Inf
// number, or maps and lists nested deeper than encoding/json decodes (see
// object.ValidateEncodable). The error is Invalid (422) naming the field,
// e.g. `status.ratio: Invalid value: NaN: not a valid JSON number ...`.
// Whoever writes (a controller, the view API server, an offline run), a
// stored object must encode, or it would fail every list and watch of its
// kind.
func checkEncodable(gvk schema.GroupVersionKind, key object.Key, obj *unstructured.Unstructured) error {
	if errs := object.ValidateEncodable(obj.Object, nil); len(errs) > 0 {
		return apierrors.NewInvalid(gvk.GroupKind(), key.Name, errs)
	}
	return nil
}

// Get returns a deep copy of the object, or a NotFound API error.
func (s *Store) Get(gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.objects[gvk][key]
	if !ok {
		return nil, apierrors.NewNotFound(gr(gvk), key.String())
	}
	return obj.DeepCopy(), nil
}

// GetShared is Get without the copy: it returns the stored object itself,
// which the caller must not modify (stored objects are never modified in
// place, so it stays as it was when read). For readers that only look,
// such as a controller comparing a target with its output.
func (s *Store) GetShared(gvk schema.GroupVersionKind, key object.Key) (*unstructured.Unstructured, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	obj, ok := s.objects[gvk][key]
	if !ok {
		return nil, apierrors.NewNotFound(gr(gvk), key.String())
	}
	return obj, nil
}

// ListShared is List without the copies (see GetShared).
func (s *Store) ListShared(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	sel, _ := s.selectSorted(gvk, ListOptions{})
	out := make([]*unstructured.Unstructured, len(sel))
	for i, k := range sel {
		out[i] = k.obj
	}
	return out
}

// List returns deep copies of all objects of a kind, sorted by namespace and name.
func (s *Store) List(gvk schema.GroupVersionKind) []*unstructured.Unstructured {
	out, _ := s.Select(gvk, ListOptions{})
	return out
}

// Kinds returns the kinds that hold at least one object, sorted.
func (s *Store) Kinds() []schema.GroupVersionKind {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []schema.GroupVersionKind
	for gvk, objs := range s.objects {
		if len(objs) > 0 {
			out = append(out, gvk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Create stores a new object; it fails with AlreadyExists if the key is taken,
// and with Invalid if the object cannot be encoded as JSON (see
// checkEncodable). It sets resourceVersion and generation (1) and returns
// a deep copy of what it stored.
//
// The store keeps obj's values below metadata (spec, status, labels, ...)
// without copying them (see adopt): the caller must not modify them after
// the call. A controller's outputs are never modified once built, so a
// view object costs the memory of its output once, not twice.
func (s *Store) Create(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	stored, err := s.CreateShared(obj)
	if err != nil {
		return nil, err
	}
	return stored.DeepCopy(), nil
}

// CreateShared is Create returning the stored object itself, which the
// caller must not modify (see GetShared).
func (s *Store) CreateShared(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk, key, err := keyOf(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := checkEncodable(gvk, key, obj); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if _, ok := s.objects[gvk][key]; ok {
		s.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(gr(gvk), key.String())
	}
	stored := adopt(obj)
	if s.opts.ServerMetadata {
		stampServerMetadata(stored)
	}
	s.rv++
	stored.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	stored.SetGeneration(1)
	if s.objects[gvk] == nil {
		s.objects[gvk] = map[object.Key]*unstructured.Unstructured{}
	}
	s.objects[gvk][key] = stored
	s.record(Added, gvk, stored, nil)
	s.mu.Unlock()
	s.notify(Event{Type: Added, Object: stored})
	return stored, nil
}

// Update replaces an existing object. If obj carries a resourceVersion it must
// match the stored one (Conflict otherwise). An update that changes nothing
// but server-owned metadata is a no-op: no new resourceVersion, no event.
// metadata.generation is bumped when anything outside metadata and status
// changes. An object that cannot be encoded as JSON is refused as by Create,
// and obj's values below metadata are kept without a copy as by Create.
func (s *Store) Update(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	stored, err := s.UpdateShared(obj)
	if err != nil {
		return nil, err
	}
	return stored.DeepCopy(), nil
}

// UpdateShared is Update returning the stored object itself, which the
// caller must not modify (see GetShared).
func (s *Store) UpdateShared(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk, key, err := keyOf(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := checkEncodable(gvk, key, obj); err != nil {
		return nil, err
	}
	s.mu.Lock()
	old, ok := s.objects[gvk][key]
	if !ok {
		s.mu.Unlock()
		return nil, apierrors.NewNotFound(gr(gvk), key.String())
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		s.mu.Unlock()
		return nil, apierrors.NewConflict(gr(gvk), key.String(),
			fmt.Errorf("the object has been modified; resourceVersion %s is not the latest (%s)", rv, old.GetResourceVersion()))
	}
	if s.opts.ServerMetadata {
		if uid := obj.GetUID(); uid != "" && old.GetUID() != "" && uid != old.GetUID() {
			s.mu.Unlock()
			return nil, apierrors.NewConflict(gr(gvk), key.String(),
				fmt.Errorf("metadata.uid %s does not match the stored object's uid %s", uid, old.GetUID()))
		}
	}
	// A deletionTimestamp that appears is a change (an object being
	// deleted), as the API server sends it.
	if sameDeletion(old, obj) && object.Equal(object.StripServerFields(old.Object), object.StripServerFields(obj.Object)) {
		s.mu.Unlock()
		return old, nil
	}
	stored := adopt(obj)
	if s.opts.ServerMetadata {
		keepServerMetadata(old, stored)
	}
	s.rv++
	stored.SetResourceVersion(strconv.FormatInt(s.rv, 10))
	gen := old.GetGeneration()
	if specChanged(old.Object, stored.Object) {
		gen++
	}
	stored.SetGeneration(gen)
	s.objects[gvk][key] = stored
	s.record(Modified, gvk, stored, old)
	s.mu.Unlock()
	s.notify(Event{Type: Modified, Object: stored, Old: old})
	return stored, nil
}

// adopt returns the object the store keeps of obj: a new top-level map and
// metadata map, which the store sets its fields in, sharing every other
// value with obj. Stored objects are never modified in place, so sharing
// is safe as long as the writer does not modify obj's values afterwards
// (the contract of Create and Update).
func adopt(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	if md, ok := obj.Object["metadata"].(map[string]any); ok {
		out.Object["metadata"] = maps.Clone(md)
	}
	return out
}

func specChanged(a, b map[string]any) bool {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "metadata" && k != "status" {
				out[k] = v
			}
		}
		return out
	}
	return !object.Equal(strip(a), strip(b))
}

// Delete removes an object; NotFound if it does not exist.
func (s *Store) Delete(gvk schema.GroupVersionKind, key object.Key) error {
	_, err := s.DeleteIf(gvk, key, Preconditions{})
	return err
}

// sameDeletion reports whether both objects are being deleted or neither.
func sameDeletion(a, b *unstructured.Unstructured) bool {
	return (a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil)
}
