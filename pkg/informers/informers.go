// Package informers counts the holders of a controller-runtime cache's
// informers of unstructured objects, so that an informer that no running
// controller uses any more is stopped and its objects dropped: the
// manager's memory and watches follow the kinds its running controllers
// watch, not every kind a controller ever watched. An informer that never
// synced (a list that keeps failing) is stopped as soon as its last holder
// gives up on it, instead of retrying its list for the life of the process.
//
// It also records what the informers of a cache built with RecordErrors get
// listing and watching their kinds, per GroupVersionKind: SyncError says why
// an informer does not sync, NotServed whether a kind's CRD is gone (also
// under a running informer), and UntilSynced gives up a wait for a sync as
// soon as the kind turns out not to be served.
package informers

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Cache is a controller-runtime cache whose informers of unstructured
// objects are handed out by Acquire and stopped (cache.Informers'
// RemoveInformer) when their last holder releases them. Everything else,
// reads included, is the wrapped cache's: a read of a kind whose informer
// was stopped starts it again, as a read of a kind never watched does.
type Cache struct {
	cache.Cache
	mu       sync.Mutex
	refs     map[schema.GroupVersionKind]int
	onRemove func(schema.GroupVersionKind)
}

// Wrap returns c with counted informers. Install it as the manager's cache
// (manager.Options.NewCache) so that every user of the manager's cache
// shares one count per kind. What RecordErrors recorded of an informer
// stopped is forgotten (it keeps the informer's HasSynced and
// ListerWatcher, and so its objects); onRemove, when not nil, is also
// called with the kind of each informer stopped, so that whoever else
// keeps something of an informer lets it go.
func Wrap(c cache.Cache, onRemove func(schema.GroupVersionKind)) *Cache {
	return &Cache{Cache: c, refs: map[schema.GroupVersionKind]int{}, onRemove: onRemove}
}

// NeedLeaderElection reports false: the cache runs on every replica, as
// controller-runtime's own cache does.
func (c *Cache) NeedLeaderElection() bool { return false }

// Holders returns how many holders gvk's informer has.
func (c *Cache) Holders(gvk schema.GroupVersionKind) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refs[gvk]
}

// Acquire returns the shared informer of gvk's unstructured objects,
// starting it when it does not run, and waits until it has synced, as
// cache.Informers' GetInformer does (bounded by ctx; the error is
// GetInformer's). release gives it back: call it once in any case, also
// when Acquire failed (so that what explains the failure, e.g. the
// informer's last list error, can be read first), after the holder's event
// handlers are removed and nothing of the holder reads the kind from the
// cache any more; later calls do nothing. The last release stops the
// informer. When c is not a *Cache its informers are used as they are and
// never stopped.
func Acquire(ctx context.Context, c cache.Informers, gvk schema.GroupVersionKind) (inf cache.Informer, release func(), err error) {
	rc, ok := c.(*Cache)
	if !ok {
		inf, err = getSynced(ctx, c, gvk)
		return inf, func() {}, err
	}
	rc.mu.Lock()
	rc.refs[gvk]++
	rc.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { rc.release(gvk) }) }
	inf, err = getSynced(ctx, rc.Cache, gvk)
	return inf, release, err
}

// syncChecker is what client-go's shared informers offer beside
// HasSynced: a channel closed once the store holds the first full list.
type syncChecker interface {
	HasSyncedChecker() toolscache.DoneChecker
}

// getSynced returns c's informer of gvk as GetInformer does, but learns of
// the sync from the informer's channel (HasSyncedChecker) as soon as it
// happens: GetInformer polls HasSynced every 100 ms (client-go's
// WaitForCacheSync), which held every controller's start (and so its
// first writes) up to 100 ms after its kind's list had arrived. The
// blocking GetInformer still runs beside the wait, so that whatever it
// decides without a sync (an error, a cache not started yet: no wait)
// stays as it was; the first of the two to finish answers.
func getSynced(ctx context.Context, c cache.Informers, gvk schema.GroupVersionKind) (cache.Informer, error) {
	inf, err := c.GetInformer(ctx, probe(gvk), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	sc, ok := inf.(syncChecker)
	if !ok {
		return c.GetInformer(ctx, probe(gvk))
	}
	if toolscache.IsDone(sc.HasSyncedChecker()) {
		return inf, nil
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		inf cache.Informer
		err error
	}
	blocking := make(chan result, 1)
	go func() {
		i, err := c.GetInformer(bctx, probe(gvk))
		blocking <- result{i, err}
	}()
	select {
	case <-sc.HasSyncedChecker().Done():
		return inf, nil
	case r := <-blocking:
		return r.inf, r.err
	}
}

// release drops one holder of gvk's informer and stops the informer when
// it was the last. The count and the removal change together under mu, so
// an Acquire that counts itself first keeps the informer, and one that
// counts itself after starts a new one.
func (c *Cache) release(gvk schema.GroupVersionKind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs[gvk]--
	if c.refs[gvk] > 0 {
		return
	}
	delete(c.refs, gvk)
	_ = c.Cache.RemoveInformer(context.Background(), probe(gvk))
	registry.forget(gvk)
	if c.onRemove != nil {
		c.onRemove(gvk)
	}
}

func probe(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
