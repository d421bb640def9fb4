package informers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// registry remembers, per GroupVersionKind, what the informers built by
// RecordErrors got listing and watching their kind: the last list/watch
// error, so that an informer that never syncs can say why (SyncError, e.g.
// a conversion webhook that fails every list) instead of only timing out,
// and whether the kind is served right now (NotServed), which a running
// informer's HasSynced does not say: once synced, an informer stays synced
// while its kind's CRD is deleted and every relist answers 404.
//
// It is package-level so that the managers' informer constructors and
// every controller of the process reach it without a handle on a manager;
// it is keyed by GVK only, so managers of one process that watch the same
// kind share an entry (the last informer created and the last result win).
// That is harmless: such managers talk to the same API server and get the
// same answers. An entry is dropped when its informer is stopped
// (Cache.release).
var registry = &watchErrors{m: map[schema.GroupVersionKind]*watchError{}}

// probeTimeout bounds SyncError's list of one object.
const probeTimeout = 5 * time.Second

type watchErrors struct {
	mu sync.Mutex
	m  map[schema.GroupVersionKind]*watchError
}

// watchError is the entry of one GVK: the last list/watch error and when
// it happened, whether the informer that got it has synced since (nil:
// unknown), a list of at most one object through that informer's
// ListerWatcher (nil: none), and the informer's current failure: its last
// list/watch error, cleared by its next list or watch that succeeds.
type watchError struct {
	err     error
	at      time.Time
	synced  func() bool
	probe   func(context.Context) error
	failing error
}

// register starts the entry of gvk for a new informer: no error yet.
func (w *watchErrors) register(gvk schema.GroupVersionKind, synced func() bool, probe func(context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[gvk] = &watchError{synced: synced, probe: probe}
}

// forget drops the entry of gvk: its informer was stopped, and the entry
// must not keep the informer (its HasSynced) and so its objects alive.
func (w *watchErrors) forget(gvk schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, gvk)
}

// record remembers err as the last list/watch error of gvk, got by an
// informer whose HasSynced is synced (nil: unknown, never stale). current
// says that err is the informer's own (not a probe's): it is then also
// the kind's current failure, until a list or watch succeeds.
func (w *watchErrors) record(gvk schema.GroupVersionKind, err error, synced func() bool, current bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[gvk]
	if e == nil {
		e = &watchError{}
		w.m[gvk] = e
	}
	e.err, e.at = err, time.Now()
	if synced != nil {
		e.synced = synced
	}
	if current {
		e.failing = err
	}
}

// succeeded clears the current failure of gvk: a list or watch of its
// informer succeeded.
func (w *watchErrors) succeeded(gvk schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[gvk]; e != nil {
		e.failing = nil
	}
}

// last returns the last list/watch error of gvk and when it was recorded,
// and the entry's probe when the informer has not synced. The error is
// nil when none was recorded or the informer that got it has synced since
// (then it is dropped: it is stale).
func (w *watchErrors) last(gvk schema.GroupVersionKind) (error, time.Time, func(context.Context) error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.m[gvk]
	if e == nil {
		return nil, time.Time{}, nil
	}
	if e.synced != nil && e.synced() {
		e.err, e.at = nil, time.Time{}
		return nil, time.Time{}, nil
	}
	return e.err, e.at, e.probe
}

// current returns the current failure of gvk's informer (nil: none, or
// no informer recorded).
func (w *watchErrors) current(gvk schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.m[gvk]; e != nil {
		return e.failing
	}
	return nil
}

// RecordErrors builds, with build, an informer of gvk over lw whose list
// and watch results are recorded for SyncError and NotServed: its errors
// (through its watch error handler, after which they are logged as
// client-go does by default, cache.DefaultWatchErrorHandler) and its lists
// and watches that succeed (build gets lw wrapped to see them). Use it as
// (part of) a cache's informer constructor (controller-runtime's
// cache.Options.NewInformer); the informer must not run before it
// returns.
func RecordErrors(gvk schema.GroupVersionKind, lw toolscache.ListerWatcher, build func(toolscache.ListerWatcher) toolscache.SharedIndexInformer) toolscache.SharedIndexInformer {
	lwc := toolscache.ToListerWatcherWithContext(lw)
	tracked := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			o, err := lwc.ListWithContext(ctx, opts)
			if err == nil {
				registry.succeeded(gvk)
			}
			return o, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := lwc.WatchWithContext(ctx, opts)
			if err == nil {
				registry.succeeded(gvk)
			}
			return w, err
		},
	}
	if l, ok := lw.(*toolscache.ListWatch); ok {
		tracked.DisableChunking = l.DisableChunking
	}
	informer := build(tracked)
	registry.register(gvk, informer.HasSynced, func(ctx context.Context) error {
		_, err := lwc.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	// It cannot fail: the informer has not started.
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		registry.record(gvk, err, informer.HasSynced, true)
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return informer
}

// SyncError returns err, the error of waiting for the informer of gvk to
// sync, with the last error that informer got listing or watching gvk:
// err's message followed by "; last list/watch error: <that error>",
// wrapping err (errors.Is and errors.As see it). When the informer has
// recorded no error, it lists one object of gvk through the informer's
// ListerWatcher (at most 5s) and reports that list's error: by default
// client-go streams an informer's initial state as watch events, and such
// a watch can hang without an error (e.g. while the API server's watch
// cache cannot list a kind whose conversion webhook fails). It returns err
// unchanged when err is nil, when the informer has synced since, or when
// there is no error to report. Only informers built by RecordErrors record
// errors; of several managers of the process watching gvk, the last error
// any of them got is the one reported. Call it before the informer is
// released (Acquire's release), which forgets what it recorded.
func SyncError(gvk schema.GroupVersionKind, err error) error {
	if err == nil {
		return nil
	}
	last, _, probe := registry.last(gvk)
	if last == nil && probe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		last = probe(ctx)
		cancel()
		if last != nil {
			registry.record(gvk, last, nil, false)
		}
	}
	if last == nil {
		return err
	}
	return fmt.Errorf("%w; last list/watch error: %w", err, last)
}

// NotServed returns the error of the last list or watch of gvk's informer
// when it answered 404 Not Found and no list or watch of that informer has
// succeeded since: the API server does not serve the kind (its CRD is not
// installed, or was deleted while the REST mapper still knows it). It
// returns nil otherwise, also when no informer built by RecordErrors
// watches gvk. It is the kind's state now, whether or not the informer
// has synced before: a running informer whose CRD is deleted keeps its
// objects and its HasSynced while every relist fails, and the answer turns
// nil again at its first list or watch that succeeds (the reflector
// retries with client-go's backoff, at most about a minute apart).
func NotServed(gvk schema.GroupVersionKind) error {
	if err := registry.current(gvk); err != nil && apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// ErrKindNotServed is the cause of a wait for an informer's sync given
// up because its kind is not served (UntilSynced, NotServed).
var ErrKindNotServed = errors.New("the API server does not serve the kind")

// UntilSynced returns a context for the wait for gvk's informer to sync
// (e.g. Acquire's): ctx bounded by timeout, cancelled early with cause
// ErrKindNotServed as soon as the informer's list answers 404 Not Found
// (NotServed, checked every 250ms). The caller tells the cases apart with
// context.Cause: ErrKindNotServed, context.DeadlineExceeded (timed out),
// or ctx's own cause. cancel releases the context's resources.
func UntilSynced(ctx context.Context, gvk schema.GroupVersionKind, timeout time.Duration) (wctx context.Context, cancel context.CancelFunc) {
	tctx, tcancel := context.WithTimeout(ctx, timeout)
	wctx, wcancel := context.WithCancelCause(tctx)
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				if NotServed(gvk) != nil {
					wcancel(ErrKindNotServed)
					return
				}
			}
		}
	}()
	return wctx, func() { wcancel(nil); tcancel() }
}
