package metacontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// expectationTimeout bounds how long a parent waits for the events of its
// own writes before it syncs anyway.
const expectationTimeout = 15 * time.Second

// parentKey identifies a parent (for decorators: a decorated object).
type parentKey struct {
	gvk schema.GroupVersionKind
	types.NamespacedName
}

func (k parentKey) String() string {
	if k.Namespace == "" {
		return k.gvk.Kind + " " + k.Name
	}
	return k.gvk.Kind + " " + k.Namespace + "/" + k.Name
}

// objRef identifies an object written by a sync.
type objRef struct {
	gvk schema.GroupVersionKind
	types.NamespacedName
}

func refOf(o *unstructured.Unstructured) objRef {
	return objRef{gvk: o.GroupVersionKind(), NamespacedName: keyOf(o)}
}

// deletedRV is the expected "resourceVersion" of a deletion: satisfied by
// a delete event or by an update that sets deletionTimestamp.
const deletedRV = "<deleted>"

// expectations tracks, per parent, the writes of its last sync whose
// events the informers have not delivered yet. While a parent has pending
// expectations its syncs are skipped: its observed state is known to be
// stale. When the last expected event arrives the parent is synced once
// more if the sync asked for a follow-up or if a foreign change arrived in
// the meantime. This is the expectations pattern of the built-in workload
// controllers, extended to updates by resourceVersion.
type expectations struct {
	mu sync.Mutex
	m  map[parentKey]*expectation
}

type expectation struct {
	want     map[objRef]string
	followUp bool
	dirty    bool
	deadline time.Time
}

func newExpectations() *expectations { return &expectations{m: map[parentKey]*expectation{}} }

// expect records the writes of a sync of pk (ref -> resourceVersion after
// the write, or deletedRV). An empty want clears pk's expectations.
func (e *expectations) expect(pk parentKey, want map[objRef]string, followUp bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(want) == 0 {
		delete(e.m, pk)
		return
	}
	e.m[pk] = &expectation{want: want, followUp: followUp, deadline: time.Now().Add(expectationTimeout)}
}

// observe is called for every event that concerns pk: obj is the new state
// (deleted says whether the event is a deletion). It reports whether pk
// must be synced.
func (e *expectations) observe(pk parentKey, obj *unstructured.Unstructured, deleted bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := e.m[pk]
	if ex == nil {
		return true
	}
	ref := refOf(obj)
	if want, ok := ex.want[ref]; ok {
		matched := (want == deletedRV && (deleted || obj.GetDeletionTimestamp() != nil)) ||
			(!deleted && want == obj.GetResourceVersion())
		if matched {
			delete(ex.want, ref)
			if len(ex.want) == 0 {
				delete(e.m, pk)
				return ex.followUp || ex.dirty
			}
			return false
		}
	}
	ex.dirty = true
	return false
}

// pending reports whether pk still waits for its own writes; expired
// expectations are dropped.
func (e *expectations) pending(pk parentKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := e.m[pk]
	if ex == nil {
		return false
	}
	if time.Now().After(ex.deadline) {
		delete(e.m, pk)
		return false
	}
	return true
}

// forget drops pk's expectations.
func (e *expectations) forget(pk parentKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, pk)
}
