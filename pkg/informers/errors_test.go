package informers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestInformerSyncErrorNoneRecorded(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "none.test", Version: "v1", Kind: "Nothing"}
	timeout := apierrors.NewTimeoutError("failed waiting for *unstructured.Unstructured Informer to sync", 0)
	if got := SyncError(gvk, timeout); got != timeout {
		t.Fatalf("SyncError = %v, want err unchanged", got)
	}
	if got := SyncError(gvk, nil); got != nil {
		t.Fatalf("SyncError(nil) = %v", got)
	}
}

func TestInformerSyncErrorWrapsRecorded(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "wrap.test", Version: "v2", Kind: "Widget"}
	other := schema.GroupVersionKind{Group: "wrap.test", Version: "v1", Kind: "Widget"}
	timeout := apierrors.NewTimeoutError("failed waiting for *unstructured.Unstructured Informer to sync", 0)
	listErr := errors.New(`conversion webhook for wrap.test/v1, Kind=Widget failed: service "nope" not found`)
	before := time.Now()
	registry.record(gvk, listErr, func() bool { return false }, true)

	got := SyncError(gvk, timeout)
	want := timeout.Error() + "; last list/watch error: " + listErr.Error()
	if got.Error() != want {
		t.Fatalf("message\n got %q\nwant %q", got.Error(), want)
	}
	if !errors.Is(got, timeout) {
		t.Fatal("errors.Is(got, err) = false")
	}
	var st *apierrors.StatusError
	if !errors.As(got, &st) || !apierrors.IsTimeout(got) {
		t.Fatal("the wrapped StatusError is not found")
	}
	if _, at, _ := registry.last(gvk); at.Before(before) {
		t.Fatalf("recorded at %v, before %v", at, before)
	}
	// Another version of the kind has its own entry.
	if got := SyncError(other, timeout); got != timeout {
		t.Fatalf("other version: %v", got)
	}
	// A later error replaces the earlier one.
	registry.record(gvk, errors.New("second"), nil, true)
	if got := SyncError(gvk, timeout).Error(); got != timeout.Error()+"; last list/watch error: second" {
		t.Fatalf("after a second error: %q", got)
	}
}

func TestInformerSyncErrorStaleAfterSync(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "stale.test", Version: "v1", Kind: "Widget"}
	var synced atomic.Bool
	registry.record(gvk, errors.New("list failed"), synced.Load, true)
	timeout := errors.New("timeout")
	if got := SyncError(gvk, timeout); got == timeout {
		t.Fatal("error not reported before the informer synced")
	}
	synced.Store(true)
	if got := SyncError(gvk, timeout); got != timeout {
		t.Fatalf("stale error reported after the informer synced: %v", got)
	}
	if err, _, _ := registry.last(gvk); err != nil {
		t.Fatalf("stale entry kept: %v", err)
	}
}

func TestWatchErrorsConcurrent(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "race.test", Version: "v1", Kind: "Widget"}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				registry.record(gvk, errors.New("x"), nil, true)
				_ = NotServed(gvk)
				registry.succeeded(gvk)
				_ = SyncError(gvk, errors.New("timeout"))
			}
		}()
	}
	wg.Wait()
}

// TestRecordErrorsListErrors runs an informer made by RecordErrors over a ListerWatcher whose lists fail, and checks that the
// failure is recorded for the informer's GVK.
func TestRecordErrorsListErrors(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "informer.test", Version: "v2", Kind: "Widget"}
	listErr := errors.New("conversion webhook failed")
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, listErr
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, listErr
		},
	}
	informer := newTestInformer(gvk, lw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)

	var recorded error
	deadline := time.Now().Add(10 * time.Second)
	for {
		if recorded, _, _ = registry.last(gvk); recorded != nil {
			// The reflector wraps it ("failed to list <gvk>: ...").
			if !errors.Is(recorded, listErr) {
				t.Fatalf("recorded %v, want %v", recorded, listErr)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no list error recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := SyncError(gvk, errors.New("timeout")).Error()
	if want := "timeout; last list/watch error: " + recorded.Error(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestInformerSyncErrorProbes checks the list of one object that
// SyncError makes when the informer recorded no error (a watch-list
// that hangs reports none).
func TestInformerSyncErrorProbes(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "probe.test", Version: "v2", Kind: "Widget"}
	listErr := errors.New("conversion webhook failed")
	var lists atomic.Int32
	var limit atomic.Int64
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			lists.Add(1)
			limit.Store(opts.Limit)
			return nil, listErr
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, listErr
		},
	}
	// Not started: it records nothing and has not synced.
	_ = newTestInformer(gvk, lw)
	timeout := apierrors.NewTimeoutError("failed waiting", 0)
	got := SyncError(gvk, timeout)
	if want := timeout.Error() + "; last list/watch error: " + listErr.Error(); got.Error() != want {
		t.Fatalf("got %q, want %q", got.Error(), want)
	}
	if !errors.Is(got, timeout) || lists.Load() != 1 || limit.Load() != 1 {
		t.Fatalf("errors.Is %v, lists %d, limit %d", errors.Is(got, timeout), lists.Load(), limit.Load())
	}
	// The probe's error is recorded: no second list.
	_ = SyncError(gvk, timeout)
	if lists.Load() != 1 {
		t.Fatalf("lists %d, want 1", lists.Load())
	}
}

func newTestInformer(gvk schema.GroupVersionKind, lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return RecordErrors(gvk, lw, func(lw toolscache.ListerWatcher) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	})
}

// switchableLW serves an empty list of gvk and watches that deliver no
// object, or, while gone is set, answers every list and watch 404 Not
// Found as the API server does for a kind whose CRD was deleted; setting
// gone ends the open watches, as the API server does.
type switchableLW struct {
	gvk     schema.GroupVersionKind
	gone    atomic.Bool
	mu      sync.Mutex
	watches []*watch.FakeWatcher
}

func (s *switchableLW) notFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Group: s.gvk.Group, Resource: "widgets"}, "")
}

func (s *switchableLW) setGone(gone bool) {
	s.gone.Store(gone)
	if gone {
		s.mu.Lock()
		for _, w := range s.watches {
			w.Stop()
		}
		s.watches = nil
		s.mu.Unlock()
	}
}

func (s *switchableLW) lw() *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			if s.gone.Load() {
				return nil, s.notFound()
			}
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
			l.SetResourceVersion("1")
			return l, nil
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if s.gone.Load() {
				return nil, s.notFound()
			}
			w := watch.NewFakeWithChanSize(1, false)
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				// Watch-list: the initial state (none) ends with a bookmark.
				b := &unstructured.Unstructured{}
				b.SetGroupVersionKind(s.gvk)
				b.SetResourceVersion("1")
				b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
				w.Action(watch.Bookmark, b)
			}
			s.mu.Lock()
			s.watches = append(s.watches, w)
			s.mu.Unlock()
			return w, nil
		},
	}
}

// TestNotServedWhileRunning checks that a synced informer whose kind stops
// being served (every list and watch answers 404) reports it through
// NotServed although its HasSynced stays true, and that the report ends
// at its first list or watch that succeeds.
func TestNotServedWhileRunning(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "gone.test", Version: "v1", Kind: "Widget"}
	s := &switchableLW{gvk: gvk}
	informer := newTestInformer(gvk, s.lw())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 15s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("synced", informer.HasSynced)
	if err := NotServed(gvk); err != nil {
		t.Fatalf("NotServed of a served kind: %v", err)
	}
	s.setGone(true)
	waitFor("NotServed reports the 404", func() bool { return NotServed(gvk) != nil })
	if err := NotServed(gvk); !apierrors.IsNotFound(err) {
		t.Fatalf("NotServed = %v, want the 404", err)
	}
	if !informer.HasSynced() {
		t.Fatal("HasSynced turned false")
	}
	// A sync error is stale once the informer synced; NotServed is not.
	if err := SyncError(gvk, errors.New("timeout")); err.Error() != "timeout" {
		t.Fatalf("SyncError of a synced informer: %v", err)
	}
	s.setGone(false)
	waitFor("NotServed clears once a list or watch succeeds", func() bool { return NotServed(gvk) == nil })
}

// TestNotServedOnlyNotFound: other list/watch errors are no "not served".
func TestNotServedOnlyNotFound(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "other.test", Version: "v1", Kind: "Widget"}
	registry.record(gvk, errors.New("connection refused"), nil, true)
	if err := NotServed(gvk); err != nil {
		t.Fatalf("NotServed after a non-404 error: %v", err)
	}
	registry.record(gvk, apierrors.NewNotFound(schema.GroupResource{Resource: "widgets"}, ""), nil, false)
	if err := NotServed(gvk); err != nil {
		t.Fatalf("NotServed after a probe's 404 (not the informer's): %v", err)
	}
	registry.record(gvk, apierrors.NewNotFound(schema.GroupResource{Resource: "widgets"}, ""), nil, true)
	if err := NotServed(gvk); err == nil {
		t.Fatal("NotServed after the informer's 404: nil")
	}
	registry.forget(gvk)
	if err := NotServed(gvk); err != nil {
		t.Fatalf("NotServed after forget: %v", err)
	}
}
