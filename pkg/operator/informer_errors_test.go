package operator

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
	if got := informerSyncError(gvk, timeout); got != timeout {
		t.Fatalf("informerSyncError = %v, want err unchanged", got)
	}
	if got := informerSyncError(gvk, nil); got != nil {
		t.Fatalf("informerSyncError(nil) = %v", got)
	}
}

func TestInformerSyncErrorWrapsRecorded(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "wrap.test", Version: "v2", Kind: "Widget"}
	other := schema.GroupVersionKind{Group: "wrap.test", Version: "v1", Kind: "Widget"}
	timeout := apierrors.NewTimeoutError("failed waiting for *unstructured.Unstructured Informer to sync", 0)
	listErr := errors.New(`conversion webhook for wrap.test/v1, Kind=Widget failed: service "nope" not found`)
	before := time.Now()
	informerErrors.record(gvk, listErr, func() bool { return false })

	got := informerSyncError(gvk, timeout)
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
	if _, at, _ := informerErrors.last(gvk); at.Before(before) {
		t.Fatalf("recorded at %v, before %v", at, before)
	}
	// Another version of the kind has its own entry.
	if got := informerSyncError(other, timeout); got != timeout {
		t.Fatalf("other version: %v", got)
	}
	// A later error replaces the earlier one.
	informerErrors.record(gvk, errors.New("second"), nil)
	if got := informerSyncError(gvk, timeout).Error(); got != timeout.Error()+"; last list/watch error: second" {
		t.Fatalf("after a second error: %q", got)
	}
}

func TestInformerSyncErrorStaleAfterSync(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "stale.test", Version: "v1", Kind: "Widget"}
	var synced atomic.Bool
	informerErrors.record(gvk, errors.New("list failed"), synced.Load)
	timeout := errors.New("timeout")
	if got := informerSyncError(gvk, timeout); got == timeout {
		t.Fatal("error not reported before the informer synced")
	}
	synced.Store(true)
	if got := informerSyncError(gvk, timeout); got != timeout {
		t.Fatalf("stale error reported after the informer synced: %v", got)
	}
	if err, _, _ := informerErrors.last(gvk); err != nil {
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
				informerErrors.record(gvk, errors.New("x"), nil)
				_ = informerSyncError(gvk, errors.New("timeout"))
			}
		}()
	}
	wg.Wait()
}

// TestNewInformerRecordsListErrors runs an informer made by the manager's
// constructor over a ListerWatcher whose lists fail, and checks that the
// failure is recorded for the informer's GVK.
func TestNewInformerRecordsListErrors(t *testing.T) {
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
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	informer := (&unstructuredWatches{}).newInformer(lw, obj, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)

	var recorded error
	deadline := time.Now().Add(10 * time.Second)
	for {
		if recorded, _, _ = informerErrors.last(gvk); recorded != nil {
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
	got := informerSyncError(gvk, errors.New("timeout")).Error()
	if want := "timeout; last list/watch error: " + recorded.Error(); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestInformerSyncErrorProbes checks the list of one object that
// informerSyncError makes when the informer recorded no error (a watch-list
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
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	// Not started: it records nothing and has not synced.
	_ = (&unstructuredWatches{}).newInformer(lw, obj, 0, toolscache.Indexers{})
	timeout := apierrors.NewTimeoutError("failed waiting", 0)
	got := informerSyncError(gvk, timeout)
	if want := timeout.Error() + "; last list/watch error: " + listErr.Error(); got.Error() != want {
		t.Fatalf("got %q, want %q", got.Error(), want)
	}
	if !errors.Is(got, timeout) || lists.Load() != 1 || limit.Load() != 1 {
		t.Fatalf("errors.Is %v, lists %d, limit %d", errors.Is(got, timeout), lists.Load(), limit.Load())
	}
	// The probe's error is recorded: no second list.
	_ = informerSyncError(gvk, timeout)
	if lists.Load() != 1 {
		t.Fatalf("lists %d, want 1", lists.Load())
	}
}
