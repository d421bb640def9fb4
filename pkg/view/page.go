package view

import (
	"container/heap"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// ErrSnapshotExpired is wrapped by the error of SelectPage when the store
// can no longer give the objects as they were at the requested
// resourceVersion: the watch history has dropped changes made after it, or
// the version is newer than the store's (another store issued it).
var ErrSnapshotExpired = errors.New("snapshot expired")

// PageOptions select one page of a kind's objects, as a Kubernetes list
// with limit and continue does (API conventions, "chunked lists").
type PageOptions struct {
	ListOptions
	// ResourceVersion is the version whose state is listed; 0 or less lists
	// the current state. An older version is rebuilt from the watch history
	// (see Options.HistoryLimit).
	ResourceVersion int64
	// Start, when set, is the first key the page may hold (inclusive);
	// keys are ordered by namespace, then name. To continue after key k,
	// pass k with "\x00" appended to its name.
	Start *object.Key
	// Limit is the most objects the page holds; 0 or less means all.
	Limit int64
}

// Page is one page of a kind's selected objects.
type Page struct {
	// Items are deep copies of the page's objects sorted by namespace and
	// name, at most Limit of them.
	Items []*unstructured.Unstructured
	// ResourceVersion is the version the page shows: PageOptions'
	// ResourceVersion, or the store's current one.
	ResourceVersion int64
	// Remaining is the number of selected objects after the page, at the
	// same version; More is Remaining > 0.
	Remaining int64
	More      bool
}

// SelectPage returns the selected objects of a kind at a resourceVersion,
// from a key on, at most Limit of them. The state at an older version is the
// current one with every later change undone through the watch history (each
// change keeps the state it replaced), so successive pages of one list show
// one consistent snapshot while objects change. Memory and time: the scan
// visits every object of the kind and every later change of it in the
// history, but keeps only Limit+1 of them, and copies only the page.
//
// Errors: ErrSnapshotExpired (wrapped) when ResourceVersion is older than
// the oldest change the history still holds, or newer than the store.
func (s *Store) SelectPage(gvk schema.GroupVersionKind, opts PageOptions) (Page, error) {
	if opts.ResourceVersion > 0 {
		// Drop the changes past the age bound first, as Watch does, so an
		// aged snapshot is not served from entries about to go.
		s.mu.Lock()
		s.history.trim(time.Now())
		s.mu.Unlock()
	}
	s.mu.RLock()
	at := s.rv
	if opts.ResourceVersion > 0 {
		at = opts.ResourceVersion
	}
	if at > s.rv {
		s.mu.RUnlock()
		return Page{}, fmt.Errorf("%w: resourceVersion %d is newer than the store's %d (it was issued by another store)", ErrSnapshotExpired, at, s.rv)
	}
	if at < s.history.compacted {
		s.mu.RUnlock()
		return Page{}, fmt.Errorf("%w: the changes after resourceVersion %d are no longer kept (history starts after %d)", ErrSnapshotExpired, at, s.history.compacted)
	}
	// past holds the state at `at` of each key changed since: nil when the
	// key did not exist then.
	var past map[object.Key]*unstructured.Unstructured
	if at < s.rv {
		past = map[object.Key]*unstructured.Unstructured{}
		s.history.since(at, func(e *historyEntry) {
			if e.gvk != gvk {
				return
			}
			k := object.Key{Namespace: e.obj.GetNamespace(), Name: e.obj.GetName()}
			if _, seen := past[k]; !seen {
				past[k] = e.old // nil for Added
			}
		})
	}
	var sel pageHeap
	capacity := int64(-1)
	if opts.Limit > 0 {
		capacity = opts.Limit + 1
	}
	var matched int64
	// The namespace is checked on the key; labels and fields only when
	// selected by (reading an object's labels copies them).
	selects := (opts.Labels != nil && !opts.Labels.Empty()) || (opts.Fields != nil && !opts.Fields.Empty())
	consider := func(k object.Key, obj *unstructured.Unstructured) {
		if opts.Start != nil && keyLess(k, *opts.Start) {
			return
		}
		if selects && !opts.Matches(obj) {
			return
		}
		matched++
		if capacity < 0 {
			sel = append(sel, keyed{k, obj}) // all of them, sorted below
		} else if int64(len(sel)) < capacity {
			heap.Push(&sel, keyed{k, obj})
		} else if keyLess(k, sel[0].key) {
			sel[0] = keyed{k, obj}
			heap.Fix(&sel, 0)
		}
	}
	for k, obj := range s.objects[gvk] {
		if opts.Namespace != "" && k.Namespace != opts.Namespace {
			continue
		}
		if _, changed := past[k]; changed {
			continue
		}
		consider(k, obj)
	}
	for k, obj := range past {
		if obj != nil && (opts.Namespace == "" || k.Namespace == opts.Namespace) {
			consider(k, obj)
		}
	}
	s.mu.RUnlock()
	// Stored and recorded objects are never modified in place, so they are
	// sorted and copied outside the lock.
	items := []keyed(sel)
	sortKeyed(items)
	n := int64(len(items))
	if opts.Limit > 0 && n > opts.Limit {
		n = opts.Limit
	}
	p := Page{Items: make([]*unstructured.Unstructured, n), ResourceVersion: at, Remaining: matched - n}
	p.More = p.Remaining > 0
	for i := range p.Items {
		p.Items[i] = items[i].obj.DeepCopy()
	}
	return p, nil
}

// keyLess orders keys by namespace, then name.
func keyLess(a, b object.Key) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// pageHeap is a max-heap of keyed objects: its root is the greatest key, the
// one to drop when a smaller key comes.
type pageHeap []keyed

func (h pageHeap) Len() int           { return len(h) }
func (h pageHeap) Less(i, j int) bool { return keyLess(h[j].key, h[i].key) }
func (h pageHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pageHeap) Push(x any)        { *h = append(*h, x.(keyed)) }
func (h *pageHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
