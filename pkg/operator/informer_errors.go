package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
)

// informerErrors remembers, per GroupVersionKind, the last error an
// informer of the manager's cache got listing or watching its kind, so
// that an informer that never syncs can say why (e.g. a conversion webhook
// that fails every list) instead of only timing out. It is package-level
// so that informerSyncError reaches it without a handle on a manager; it
// is keyed by GVK only, so managers of one process that watch the same
// kind share an entry (the last informer created and the last error win).
// That is harmless: such managers talk to the same API server and get the
// same errors, an entry only explains a sync timeout that happened anyway,
// and an error whose informer has synced since is ignored.
var informerErrors = &watchErrors{m: map[schema.GroupVersionKind]*watchError{}}

// probeTimeout bounds informerSyncError's list of one object.
const probeTimeout = 5 * time.Second

type watchErrors struct {
	mu sync.Mutex
	m  map[schema.GroupVersionKind]*watchError
}

// watchError is the entry of one GVK: the last list/watch error and when
// it happened, whether the informer that got it has synced since (nil:
// unknown), and a list of at most one object through that informer's
// ListerWatcher (nil: none).
type watchError struct {
	err    error
	at     time.Time
	synced func() bool
	probe  func(context.Context) error
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
// informer whose HasSynced is synced (nil: unknown, never stale).
func (w *watchErrors) record(gvk schema.GroupVersionKind, err error, synced func() bool) {
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

// recordWatchErrors makes informer, which must not have started yet,
// record its list/watch errors as those of gvk, then log them as client-go
// does by default (cache.DefaultWatchErrorHandler). lw is the informer's
// ListerWatcher, which informerSyncError lists one object through when the
// informer has recorded no error.
func recordWatchErrors(informer toolscache.SharedIndexInformer, gvk schema.GroupVersionKind, lw toolscache.ListerWatcher) error {
	lwc := toolscache.ToListerWatcherWithContext(lw)
	informerErrors.register(gvk, informer.HasSynced, func(ctx context.Context) error {
		_, err := lwc.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	return informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		informerErrors.record(gvk, err, informer.HasSynced)
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// informerSyncError returns err, the error of waiting for the informer of
// gvk to sync, with the last error that informer got listing or watching
// gvk: err's message followed by "; last list/watch error: <that error>",
// wrapping err (errors.Is and errors.As see it). When the informer has
// recorded no error, it lists one object of gvk through the informer's
// ListerWatcher (at most 5s) and reports that list's error: by default
// client-go streams an informer's initial state as watch events, and such
// a watch can hang without an error (e.g. while the API server's watch
// cache cannot list a kind whose conversion webhook fails). It returns err
// unchanged when err is nil, when the informer has synced since, or when
// there is no error to report. Errors are recorded by the manager's
// informers (NewManager) per GVK only, in one registry for the whole
// process: of several managers watching gvk, the last error any of them
// got is the one reported.
func informerSyncError(gvk schema.GroupVersionKind, err error) error {
	if err == nil {
		return nil
	}
	last, _, probe := informerErrors.last(gvk)
	if last == nil && probe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		last = probe(ctx)
		cancel()
		if last != nil {
			informerErrors.record(gvk, last, nil)
		}
	}
	if last == nil {
		return err
	}
	return fmt.Errorf("%w; last list/watch error: %w", err, last)
}

// kindNotServedYet reports whether the last list/watch error of gvk's
// informer says that the API server does not serve the kind (404 Not
// Found: its CRD is not installed, or was deleted while the REST mapper
// still knows it). Waiting for such an informer to sync is pointless.
func kindNotServedYet(gvk schema.GroupVersionKind) bool {
	last, _, _ := informerErrors.last(gvk)
	return last != nil && apierrors.IsNotFound(last)
}

// errKindNotServed is the cause of a wait for an informer's sync given up
// because its kind is not served (see kindNotServedYet).
var errKindNotServed = errors.New("the API server does not serve the kind")

// watchUntilSynced returns a context for the wait for gvk's informer to
// sync: ctx bounded by timeout, cancelled early with cause
// errKindNotServed when the informer's list answers 404 Not Found.
func watchUntilSynced(ctx context.Context, gvk schema.GroupVersionKind, timeout time.Duration) (context.Context, context.CancelFunc) {
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
				if kindNotServedYet(gvk) {
					wcancel(errKindNotServed)
					return
				}
			}
		}
	}()
	return wctx, func() { wcancel(nil); tcancel() }
}
