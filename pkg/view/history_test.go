package view

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// bigView returns a view object of about size bytes of JSON, built from
// fresh allocations as an object decoded from a request is; revision is the
// one field that differs between versions.
func bigView(size, revision int) *unstructured.Unstructured {
	const itemBytes = 2800
	items := make([]any, 0, size/itemBytes)
	for i := 0; i < size/itemBytes; i++ {
		items = append(items, map[string]any{
			"name": fmt.Sprintf("item-%04d", i),
			"data": strings.Repeat(string(rune('a'+i%26)), itemBytes-40),
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "big", "namespace": "default"},
		"spec":     map[string]any{"revision": int64(revision), "items": items},
	}}
}

func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestHistoryBoundedByBytes: 250 one-field patches of a 2.8 MB object keep
// at most DefaultHistoryBytes of old versions alive (they used to keep all
// 250), and a watch from a version whose changes were dropped is answered
// with 410 Gone.
func TestHistoryBoundedByBytes(t *testing.T) {
	const objBytes, patches = 2_800_000, 250
	s := NewStore()
	before := heapAlloc()
	first := mustCreate(t, s, bigView(objBytes, 0))
	if b, _ := json.Marshal(first.Object); len(b) < objBytes*9/10 || len(b) > objBytes*11/10 {
		t.Fatalf("object is %d bytes of JSON, want about %d", len(b), objBytes)
	}
	var last *unstructured.Unstructured
	for i := 1; i <= patches; i++ {
		var err error
		if last, err = s.Update(bigView(objBytes, i)); err != nil {
			t.Fatal(err)
		}
	}
	grown := heapAlloc() - before
	s.mu.RLock()
	kept, bytes := s.history.n, s.history.bytes
	s.mu.RUnlock()
	t.Logf("after %d patches: %d history entries, %d MiB estimated, heap grown by %d MiB",
		patches, kept, bytes>>20, grown>>20)
	if bytes > DefaultHistoryBytes {
		t.Errorf("history holds %d bytes, bound %d", bytes, DefaultHistoryBytes)
	}
	// The live object, the history's versions and allocator slack.
	if limit := int64(DefaultHistoryBytes + 2*objBytes + 16<<20); grown > limit {
		t.Errorf("heap grew by %d MiB after %d patches, want at most %d MiB", grown>>20, patches, limit>>20)
	}
	if kept == 0 || kept >= patches {
		t.Errorf("history keeps %d of %d versions, want some but not all", kept, patches)
	}

	if _, err := s.Watch(podGVK, WatchOptions{ResourceVersion: first.GetResourceVersion()}); !apierrors.IsResourceExpired(err) {
		t.Errorf("watch from the first version: %v, want 410 Gone (Expired)", err)
	}
	rv, _ := strconv.ParseInt(last.GetResourceVersion(), 10, 64)
	w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: strconv.FormatInt(rv-1, 10)})
	if err != nil {
		t.Fatalf("watch from the version before the last: %v", err)
	}
	defer w.Stop()
	if ev := next(t, w); ev.Type != Modified || ev.Object.GetResourceVersion() != last.GetResourceVersion() {
		t.Errorf("resumed event %s at %s, want MODIFIED at %s", ev.Type, ev.Object.GetResourceVersion(), last.GetResourceVersion())
	}
}

func TestHistoryBounds(t *testing.T) {
	t.Run("an entry past the byte bound is dropped at once", func(t *testing.T) {
		s := NewStoreWithOptions(Options{HistoryBytes: 1000})
		a := mustCreate(t, s, labeled("default", "a", nil))
		big := bigView(10_000, 0)
		big.SetName("big")
		b := mustCreate(t, s, big)
		if _, err := s.Watch(podGVK, WatchOptions{ResourceVersion: a.GetResourceVersion()}); !apierrors.IsResourceExpired(err) {
			t.Errorf("watch from before the big change: %v, want 410 Gone", err)
		}
		w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: b.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch from the big change: %v", err)
		}
		defer w.Stop()
		mustCreate(t, s, labeled("default", "c", nil))
		if got := describe(next(t, w)); got != "ADDED default/c" {
			t.Errorf("event %q", got)
		}
	})
	t.Run("entries expire by age without further changes", func(t *testing.T) {
		s := NewStoreWithOptions(Options{HistoryAge: 20 * time.Millisecond})
		x := mustCreate(t, s, labeled("default", "x", nil))
		mustCreate(t, s, labeled("default", "y", nil))
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.RLock()
			n := s.history.n
			s.mu.RUnlock()
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d history entries still kept after 5s with a 20ms age bound", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := s.Watch(podGVK, WatchOptions{ResourceVersion: x.GetResourceVersion()}); !apierrors.IsResourceExpired(err) {
			t.Errorf("watch from an expired version: %v, want 410 Gone", err)
		}
		// The current version is still a valid place to resume from.
		w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: s.ResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
	})
	t.Run("an old version is refused even before the timer drops it", func(t *testing.T) {
		s := NewStoreWithOptions(Options{HistoryAge: time.Hour})
		x := mustCreate(t, s, labeled("default", "x", nil))
		mustCreate(t, s, labeled("default", "y", nil))
		s.mu.Lock()
		for i := 0; i < s.history.n; i++ {
			s.history.buf[(s.history.start+i)%len(s.history.buf)].at = time.Now().Add(-2 * time.Hour)
		}
		s.mu.Unlock()
		if _, err := s.Watch(podGVK, WatchOptions{ResourceVersion: x.GetResourceVersion()}); !apierrors.IsResourceExpired(err) {
			t.Errorf("watch from a version older than the age bound: %v, want 410 Gone", err)
		}
	})
}

// TestWatchQueueBytesCloses: a watcher that does not read while big objects
// change is closed once its queue passes the byte bound, long before the
// event count bound.
func TestWatchQueueBytesCloses(t *testing.T) {
	s := NewStore()
	w, err := s.Watch(podGVK, WatchOptions{ResourceVersion: "0", SendInitialEvents: ptr.To(false), QueueBytes: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := 0; i < 10; i++ {
		obj := bigView(30_000, i)
		obj.SetName(fmt.Sprintf("big-%d", i))
		mustCreate(t, s, obj)
	}
	if err := w.Err(); !apierrors.IsResourceExpired(err) {
		t.Fatalf("10 changes of 30 kB each did not expire a 100 kB watch queue: %v", err)
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

// TestSizeOfEstimatesHeap: the size estimate of a decoded object is within a
// factor of two of the heap it takes.
func TestSizeOfEstimatesHeap(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","labels":{"app":"web"}},"spec":{"items":[`)
	for i := 0; i < 20_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"item-%05d","port":%d,"ready":true,"tags":["a","bb"],"image":"registry.example.com/app:v%d"}`, i, 8000+i%1000, i%7)
	}
	b.WriteString(`]}}`)
	data := []byte(b.String())
	before := heapAlloc()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	heap := heapAlloc() - before
	est := sizeOf(obj.Object)
	runtime.KeepAlive(obj)
	t.Logf("JSON %d bytes, heap %d bytes, estimate %d bytes", len(data), heap, est)
	if est < heap/2 || est > heap*2 {
		t.Errorf("estimate %d bytes, heap %d bytes: not within a factor of two", est, heap)
	}
}
