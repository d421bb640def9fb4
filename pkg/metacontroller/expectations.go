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
// more if the sync asked for a follow-up, if a foreign change arrived in
// the meantime, or if a sync was skipped while waiting. This is the
// expectations pattern of the built-in workload controllers, extended to
// updates by resourceVersion.
//
// A sync brackets its writes with begin and finish: events that arrive
// while it runs (before the resourceVersions of its writes are known) are
// remembered and matched at finish.
type expectations struct {
	mu sync.Mutex
	m  map[parentKey]*expectation
}

type expectation struct {
	open     bool
	seen     map[objRef][]string
	want     map[objRef]string
	followUp bool
	dirty    bool
	deadline time.Time
}

func newExpectations() *expectations { return &expectations{m: map[parentKey]*expectation{}} }

// begin opens the expectations of a sync of pk.
func (e *expectations) begin(pk parentKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[pk] = &expectation{open: true, seen: map[objRef][]string{}}
}

func matches(want, rv string, deleting bool) bool {
	return (want == deletedRV && deleting) || want == rv
}

// finish records the writes of the sync of pk (ref -> resourceVersion
// after the write, or deletedRV) and reports whether pk must be synced
// again right away: all writes were already observed and a follow-up was
// asked for or something else happened meanwhile.
func (e *expectations) finish(pk parentKey, want map[objRef]string, followUp bool) (resync, waiting bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := e.m[pk]
	if ex == nil || !ex.open {
		ex = &expectation{seen: map[objRef][]string{}}
	}
	ex.open, ex.followUp = false, followUp
	ex.want = map[objRef]string{}
	for ref, rv := range want {
		ex.want[ref] = rv
	}
	for ref, rvs := range ex.seen {
		for _, rv := range rvs {
			if w, ok := ex.want[ref]; ok && matches(w, rv, rv == deletedRV) {
				delete(ex.want, ref)
			} else {
				ex.dirty = true
			}
		}
	}
	ex.seen = nil
	if len(ex.want) == 0 {
		delete(e.m, pk)
		return ex.followUp || ex.dirty, false
	}
	ex.deadline = time.Now().Add(expectationTimeout)
	e.m[pk] = ex
	return false, true
}

// verdict says what an event means for a parent's sync.
type verdict int

const (
	// ignore: the event is one of our own writes (or arrived while a sync
	// runs); no sync.
	ignore verdict = iota
	// changed: a change nobody expected; sync.
	changed
	// settled: the last awaited write was observed; sync (the follow-up).
	settled
)

// observe is called for every event that concerns pk: obj is the new state
// (deleted says whether the event is a deletion).
func (e *expectations) observe(pk parentKey, obj *unstructured.Unstructured, deleted bool) verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := e.m[pk]
	if ex == nil {
		return changed
	}
	ref := refOf(obj)
	deleting := deleted || obj.GetDeletionTimestamp() != nil
	if ex.open {
		rv := obj.GetResourceVersion()
		if deleting {
			rv = deletedRV
		}
		ex.seen[ref] = append(ex.seen[ref], rv)
		if deleting && !deleted {
			ex.seen[ref] = append(ex.seen[ref], obj.GetResourceVersion())
		}
		return ignore
	}
	if want, ok := ex.want[ref]; ok && matches(want, obj.GetResourceVersion(), deleting) {
		delete(ex.want, ref)
		if len(ex.want) == 0 {
			delete(e.m, pk)
			if ex.followUp || ex.dirty {
				return settled
			}
		}
		return ignore
	}
	ex.dirty = true
	return ignore
}

// pending reports whether pk still waits for its own writes; expired
// expectations are dropped. A sync skipped because of them is remembered
// so that it happens when they are met.
func (e *expectations) pending(pk parentKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	ex := e.m[pk]
	if ex == nil || ex.open {
		return false
	}
	if time.Now().After(ex.deadline) {
		delete(e.m, pk)
		return false
	}
	ex.dirty = true
	return true
}

// waitingFor lists the writes of pk still awaited (for logs).
func (e *expectations) waitingFor(pk parentKey) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	if ex := e.m[pk]; ex != nil {
		for ref, rv := range ex.want {
			out = append(out, ref.gvk.Kind+" "+ref.String()+"@"+rv)
		}
	}
	return out
}

// empty reports whether no parent has expectations: no sync runs or
// awaits the events of its writes.
func (e *expectations) empty() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m) == 0
}

// forget drops pk's expectations.
func (e *expectations) forget(pk parentKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, pk)
}
