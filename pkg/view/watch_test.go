package view

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/dcontroller/dcontroller/pkg/object"
)

func labeled(ns, name string, lbl map[string]string) *unstructured.Unstructured {
	p := pod(name, map[string]any{"x": int64(1)})
	p.SetNamespace(ns)
	p.SetLabels(lbl)
	return p
}

// next reads one event or fails after a second.
func next(t *testing.T, w *Watcher) WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(time.Second):
		t.Fatal("no event within 1s")
	}
	return WatchEvent{}
}

func expectNone(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("unexpected event %s %s", ev.Type, ev.Object.GetName())
		}
	case <-time.After(50 * time.Millisecond):
	}
}

func describe(ev WatchEvent) string {
	return fmt.Sprintf("%s %s/%s", ev.Type, ev.Object.GetNamespace(), ev.Object.GetName())
}

func TestWatchInitialAndLive(t *testing.T) {
	s := NewStore()
	mustCreate(t, s, labeled("default", "b", nil))
	mustCreate(t, s, labeled("default", "a", nil))
	w, err := s.Watch(podGVK, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"ADDED default/a", "ADDED default/b"} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("initial event %q, want %q", got, want)
		}
	}
	upd := labeled("default", "a", map[string]string{"k": "v"})
	if _, err := s.Update(upd); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(podGVK, object.Key{Namespace: "default", Name: "b"}); err != nil {
		t.Fatal(err)
	}
	ev := next(t, w)
	if describe(ev) != "MODIFIED default/a" || ev.Object.GetLabels()["k"] != "v" {
		t.Fatalf("live event %s labels %v", describe(ev), ev.Object.GetLabels())
	}
	del := next(t, w)
	if describe(del) != "DELETED default/b" {
		t.Fatalf("delete event %s", describe(del))
	}
	// A deletion carries the deletion's resourceVersion (the store's latest).
	if del.Object.GetResourceVersion() != s.ResourceVersion() {
		t.Errorf("deleted object rv %s, store rv %s", del.Object.GetResourceVersion(), s.ResourceVersion())
	}
	// Other kinds are not delivered.
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default"}}}
	mustCreate(t, s, other)
	expectNone(t, w)
}

func mustCreate(t *testing.T, s *Store, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Create(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWatchResume(t *testing.T) {
	s := NewStoreWithOptions(Options{HistoryLimit: 4})
	first := mustCreate(t, s, labeled("default", "a", nil))
	mustCreate(t, s, labeled("default", "b", nil))
	mustCreate(t, s, labeled("default", "c", nil))

	w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: first.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADDED default/b", "ADDED default/c"} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("resumed event %q, want %q", got, want)
		}
	}
	expectNone(t, w)
	w.Stop()

	// Push the first changes out of the 4-event history.
	for _, n := range []string{"d", "e", "f"} {
		mustCreate(t, s, labeled("default", n, nil))
	}
	cases := []struct {
		rv   string
		want func(error) bool
		name string
	}{
		{first.GetResourceVersion(), apierrors.IsResourceExpired, "compacted"},
		{"999", apierrors.IsResourceExpired, "from the future"},
		{"abc", apierrors.IsBadRequest, "not a number"},
	}
	for _, c := range cases {
		if _, err := s.Watch(podGVK, WatchOptions{ResourceVersion: c.rv}); !c.want(err) {
			t.Errorf("%s: watch from %s: %v", c.name, c.rv, err)
		}
	}
	// The newest versions are still resumable.
	w, err = s.Watch(podGVK, WatchOptions{ResourceVersion: strconv.Itoa(4)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range []string{"ADDED default/e", "ADDED default/f"} {
		if got := describe(next(t, w)); got != want {
			t.Fatalf("resumed event %q, want %q", got, want)
		}
	}
}

func TestWatchSelectors(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	cases := []struct {
		name string
		opts ListOptions
		ops  func(s *Store)
		want []string
	}{{
		name: "label transitions",
		opts: ListOptions{Labels: sel},
		ops: func(s *Store) {
			mustUpdate(s, labeled("default", "a", map[string]string{"app": "web"}))
			mustUpdate(s, labeled("default", "a", map[string]string{"app": "web", "v": "2"}))
			mustUpdate(s, labeled("default", "a", map[string]string{"app": "db"}))
			mustUpdate(s, labeled("default", "b", map[string]string{"app": "db", "v": "3"}))
		},
		want: []string{"ADDED default/a", "MODIFIED default/a", "DELETED default/a"},
	}, {
		name: "namespace",
		opts: ListOptions{Namespace: "other"},
		ops: func(s *Store) {
			_, _ = s.Create(labeled("other", "x", nil))
			mustUpdate(s, labeled("default", "a", map[string]string{"v": "1"}))
			_ = s.Delete(podGVK, object.Key{Namespace: "other", Name: "x"})
		},
		want: []string{"ADDED other/x", "DELETED other/x"},
	}, {
		name: "field selector on name",
		opts: ListOptions{Fields: fields.OneTermEqualSelector("metadata.name", "b")},
		ops: func(s *Store) {
			mustUpdate(s, labeled("default", "a", map[string]string{"v": "1"}))
			mustUpdate(s, labeled("default", "b", map[string]string{"v": "1"}))
		},
		want: []string{"MODIFIED default/b"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewStore()
			mustCreate(t, s, labeled("default", "a", nil))
			mustCreate(t, s, labeled("default", "b", map[string]string{"app": "db"}))
			w, err := s.Watch(podGVK, WatchOptions{ListOptions: c.opts, ResourceVersion: s.ResourceVersion()})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			c.ops(s)
			for _, want := range c.want {
				if got := describe(next(t, w)); got != want {
					t.Fatalf("event %q, want %q", got, want)
				}
			}
			expectNone(t, w)
		})
	}
}

func mustUpdate(s *Store, obj *unstructured.Unstructured) {
	if _, err := s.Update(obj); err != nil {
		panic(err)
	}
}

func TestWatchBookmarks(t *testing.T) {
	s := NewStore()
	mustCreate(t, s, labeled("default", "a", nil))
	w, err := s.Watch(podGVK, WatchOptions{SendInitialEvents: ptr.To(true), InitialEventsBookmark: true,
		BookmarkInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := describe(next(t, w)); got != "ADDED default/a" {
		t.Fatalf("initial event %q", got)
	}
	end := next(t, w)
	if end.Type != Bookmark || end.Object.GetAnnotations()[InitialEventsEndAnnotation] != "true" ||
		end.Object.GetResourceVersion() != s.ResourceVersion() || end.Object.GetKind() != "Pod" {
		t.Fatalf("initial-events-end bookmark: %s %v", end.Type, end.Object.Object)
	}
	// Changes to another kind advance the store; a quiet watcher's next
	// bookmark reports the new version, from which a watch resumes.
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "default"}}}
	mustCreate(t, s, other)
	var bm WatchEvent
	for bm.Type != Bookmark || bm.Object.GetResourceVersion() != s.ResourceVersion() {
		bm = next(t, w)
	}
	if len(bm.Object.GetAnnotations()) != 0 {
		t.Errorf("periodic bookmark annotated: %v", bm.Object.GetAnnotations())
	}
	w2, err := s.Watch(podGVK, WatchOptions{ResourceVersion: bm.Object.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	mustCreate(t, s, labeled("default", "z", nil))
	if got := describe(next(t, w2)); got != "ADDED default/z" {
		t.Fatalf("event after resuming from a bookmark: %q", got)
	}
}

func TestWatchOverflowCloses(t *testing.T) {
	s := NewStore()
	w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: "0", SendInitialEvents: ptr.To(false), QueueLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads: the first event blocks in delivery, the queue overflows.
	for i := 0; i < 10; i++ {
		mustCreate(t, s, labeled("default", fmt.Sprintf("p%d", i), nil))
	}
	deadline := time.After(2 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("overflowing watch not closed")
		}
	}
}

// TestWatchConcurrentWritersOrdered: with concurrent writers, a watcher sees
// every change once, in strictly increasing resourceVersion order.
func TestWatchConcurrentWritersOrdered(t *testing.T) {
	s := NewStore()
	w, err := s.Watch(podGVK, WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				name := fmt.Sprintf("w%d-%d", i, j)
				if _, err := s.Create(labeled("default", name, nil)); err != nil {
					t.Error(err)
				}
				mustUpdate(s, labeled("default", name, map[string]string{"n": "1"}))
			}
		}()
	}
	last := int64(0)
	for n := 0; n < 2*writers*each; n++ {
		ev := next(t, w)
		rv, _ := strconv.ParseInt(ev.Object.GetResourceVersion(), 10, 64)
		if rv <= last {
			t.Fatalf("event %d: resourceVersion %d after %d", n, rv, last)
		}
		last = rv
	}
	wg.Wait()
	expectNone(t, w)
}

func TestSelectDeleteCollectionPreconditions(t *testing.T) {
	s := NewStore()
	a := mustCreate(t, s, labeled("default", "a", map[string]string{"app": "web"}))
	mustCreate(t, s, labeled("default", "b", map[string]string{"app": "db"}))
	mustCreate(t, s, labeled("other", "c", map[string]string{"app": "web"}))

	got, rv := s.Select(podGVK, ListOptions{Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if len(got) != 2 || got[0].GetName() != "a" || got[1].GetName() != "c" || rv != "3" {
		t.Fatalf("select: %d objects, rv %s", len(got), rv)
	}
	got, _ = s.Select(podGVK, ListOptions{Namespace: "default", Fields: fields.OneTermEqualSelector("metadata.name", "b")})
	if len(got) != 1 || got[0].GetName() != "b" {
		t.Fatalf("select by field: %v", got)
	}

	key := object.Key{Namespace: "default", Name: "a"}
	if _, err := s.DeleteIf(podGVK, key, Preconditions{ResourceVersion: "999"}); !apierrors.IsConflict(err) {
		t.Fatalf("stale precondition: %v", err)
	}
	last, err := s.DeleteIf(podGVK, key, Preconditions{ResourceVersion: a.GetResourceVersion()})
	if err != nil || last.GetName() != "a" {
		t.Fatalf("delete with precondition: %v", err)
	}

	var events []Event
	s.Subscribe(func(ev Event) { events = append(events, ev) })
	deleted := s.DeleteCollection(podGVK, ListOptions{Labels: labels.SelectorFromSet(labels.Set{"app": "web"})})
	if len(deleted) != 1 || deleted[0].GetName() != "c" || len(events) != 1 || events[0].Type != Deleted {
		t.Fatalf("deletecollection: %d deleted, %d events", len(deleted), len(events))
	}
	if left := s.List(podGVK); len(left) != 1 || left[0].GetName() != "b" {
		t.Fatalf("left after deletecollection: %v", left)
	}
}

func TestServerMetadata(t *testing.T) {
	s := NewStore()
	pre := mustCreate(t, s, labeled("default", "old", nil))
	if pre.GetUID() != "" {
		t.Fatalf("uid without ServerMetadata: %s", pre.GetUID())
	}
	s.SetOptions(Options{ServerMetadata: true})
	stamped, _ := s.Get(podGVK, object.Key{Namespace: "default", Name: "old"})
	if ts := stamped.GetCreationTimestamp(); stamped.GetUID() == "" || ts.IsZero() || stamped.GetResourceVersion() != pre.GetResourceVersion() {
		t.Fatalf("backfill: uid %q ts %v rv %s", stamped.GetUID(), ts, stamped.GetResourceVersion())
	}

	created := mustCreate(t, s, labeled("default", "a", nil))
	if created.GetUID() == "" {
		t.Fatal("no uid on create")
	}
	// A writer that drops server fields (as pipelines do) keeps the uid.
	upd, err := s.Update(labeled("default", "a", map[string]string{"x": "y"}))
	if err != nil || upd.GetUID() != created.GetUID() || upd.GetCreationTimestamp() != created.GetCreationTimestamp() {
		t.Fatalf("update lost server metadata: %v uid %s", err, upd.GetUID())
	}
	forged := labeled("default", "a", map[string]string{"x": "z"})
	forged.SetUID("not-the-uid")
	if _, err := s.Update(forged); !apierrors.IsConflict(err) {
		t.Fatalf("update with another uid: %v", err)
	}
}

// TestWatchFromAnotherServingStore: with ServerMetadata, resourceVersions
// start at a random epoch of the store, so a watch resumed on one store
// from a version another store issued (a restarted manager, or the member
// that held the views before a handover) answers 410 Gone, however many
// writes either made, instead of replaying from a position that means
// nothing here.
func TestWatchFromAnotherServingStore(t *testing.T) {
	earlier := NewStoreWithOptions(Options{ServerMetadata: true})
	for i := range 2000 {
		mustCreate(t, earlier, labeled("default", fmt.Sprint("o", i), nil))
	}
	later := NewStoreWithOptions(Options{ServerMetadata: true})
	mustCreate(t, later, labeled("default", "a", nil))
	rvOf := func(s *Store) string { return s.ResourceVersion() }
	for _, c := range []struct {
		name     string
		from, at *Store
	}{{"from an earlier store", earlier, later}, {"from a later store", later, earlier}} {
		if _, err := c.at.Watch(podGVK, WatchOptions{ResourceVersion: rvOf(c.from)}); !apierrors.IsResourceExpired(err) {
			t.Errorf("%s: watch from %s: %v, want 410 Gone", c.name, rvOf(c.from), err)
		}
	}
	// A store's own versions still resume, also after its options change.
	earlier.SetOptions(Options{ServerMetadata: true, HistoryLimit: 100})
	w, err := earlier.Watch(podGVK, WatchOptions{ResourceVersion: rvOf(earlier)})
	if err != nil {
		t.Fatalf("resuming from the store's own version: %v", err)
	}
	w.Stop()
}
