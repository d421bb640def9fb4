package informers

import (
	"context"
	"errors"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fakeCache records the informers it runs; GetInformer fails for the kinds
// in failing (after starting the informer, as controller-runtime's does
// when the sync wait times out).
type fakeCache struct {
	cache.Cache
	mu      sync.Mutex
	running map[schema.GroupVersionKind]bool
	starts  int
	removes int
	failing map[schema.GroupVersionKind]bool
}

func newFake() *fakeCache {
	return &fakeCache{running: map[schema.GroupVersionKind]bool{}, failing: map[schema.GroupVersionKind]bool{}}
}

func (f *fakeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running[gvk] {
		f.running[gvk] = true
		f.starts++
	}
	if f.failing[gvk] {
		return nil, errors.New("timed out waiting for the informer to sync")
	}
	return nil, nil
}

func (f *fakeCache) RemoveInformer(_ context.Context, obj client.Object) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[gvk] {
		f.removes++
	}
	delete(f.running, gvk)
	return nil
}

func (f *fakeCache) isRunning(gvk schema.GroupVersionKind) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[gvk]
}

var (
	pods = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	cms  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
)

func TestLastReleaseStopsTheInformer(t *testing.T) {
	f := newFake()
	c := Wrap(f, nil)
	ctx := context.Background()
	_, r1, err := Acquire(ctx, c, pods)
	if err != nil {
		t.Fatal(err)
	}
	_, r2, err := Acquire(ctx, c, pods)
	if err != nil {
		t.Fatal(err)
	}
	_, r3, err := Acquire(ctx, c, cms)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Holders(pods); got != 2 {
		t.Fatalf("pods have %d holders, want 2", got)
	}
	r1()
	r1() // a second call does nothing
	if !f.isRunning(pods) || c.Holders(pods) != 1 {
		t.Fatalf("after one of two releases: running %v, holders %d; want running, 1", f.isRunning(pods), c.Holders(pods))
	}
	r2()
	if f.isRunning(pods) || c.Holders(pods) != 0 {
		t.Fatalf("after the last release: running %v, holders %d; want stopped, 0", f.isRunning(pods), c.Holders(pods))
	}
	if !f.isRunning(cms) {
		t.Fatal("releasing pods stopped the ConfigMap informer")
	}
	r3()
	if f.isRunning(cms) {
		t.Fatal("the ConfigMap informer runs after its last release")
	}
	// Acquired again: a new informer.
	_, r4, err := Acquire(ctx, c, pods)
	if err != nil {
		t.Fatal(err)
	}
	if !f.isRunning(pods) || f.starts != 3 {
		t.Fatalf("acquired again: running %v, starts %d; want running, 3", f.isRunning(pods), f.starts)
	}
	r4()
}

func TestFailedAcquireStopsAnInformerNobodyHolds(t *testing.T) {
	f := newFake()
	f.failing[pods] = true
	var removed []schema.GroupVersionKind
	c := Wrap(f, func(gvk schema.GroupVersionKind) { removed = append(removed, gvk) })
	_, release, err := Acquire(context.Background(), c, pods)
	if err == nil {
		t.Fatal("Acquire did not report the informer's error")
	}
	// The informer runs until the release, so that its failure can be
	// explained.
	if !f.isRunning(pods) || c.Holders(pods) != 1 {
		t.Fatalf("after a failed acquire: running %v, holders %d; want running, 1", f.isRunning(pods), c.Holders(pods))
	}
	release()
	release() // does nothing
	if f.isRunning(pods) || c.Holders(pods) != 0 || f.removes != 1 {
		t.Fatalf("released after a failed acquire: running %v, holders %d, removes %d; want stopped, 0, 1", f.isRunning(pods), c.Holders(pods), f.removes)
	}
	if len(removed) != 1 || removed[0] != pods {
		t.Fatalf("onRemove saw %v, want [%v]", removed, pods)
	}
}

func TestFailedAcquireKeepsAHeldInformer(t *testing.T) {
	f := newFake()
	c := Wrap(f, nil)
	ctx := context.Background()
	_, held, err := Acquire(ctx, c, pods)
	if err != nil {
		t.Fatal(err)
	}
	f.failing[pods] = true
	_, failed, err := Acquire(ctx, c, pods)
	if err == nil {
		t.Fatal("Acquire did not report the informer's error")
	}
	failed()
	if !f.isRunning(pods) || c.Holders(pods) != 1 {
		t.Fatalf("a failed acquire next to a holder: running %v, holders %d; want running, 1", f.isRunning(pods), c.Holders(pods))
	}
	held()
	if f.isRunning(pods) {
		t.Fatal("the informer runs after its last release")
	}
}

// TestConcurrentHolders acquires and releases from many goroutines (run
// with -race): whenever a holder holds the kind, its informer runs, and
// none runs once all are released.
func TestConcurrentHolders(t *testing.T) {
	f := newFake()
	c := Wrap(f, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				_, release, err := Acquire(ctx, c, pods)
				if err != nil {
					errs <- err
					return
				}
				if !f.isRunning(pods) {
					errs <- errors.New("a holder's informer is not running")
					release()
					return
				}
				release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if f.isRunning(pods) || c.Holders(pods) != 0 {
		t.Fatalf("after all releases: running %v, holders %d; want stopped, 0", f.isRunning(pods), c.Holders(pods))
	}
}

func TestPlainCacheIsUsedAsIs(t *testing.T) {
	f := newFake()
	_, release, err := Acquire(context.Background(), f, pods)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if !f.isRunning(pods) || f.removes != 0 {
		t.Fatalf("a cache that is not a *Cache: running %v, removes %d; want running, 0", f.isRunning(pods), f.removes)
	}
}

// syncingCache hands out one informer whose sync is a channel the test
// closes; its blocking GetInformer (without BlockUntilSynced(false))
// returns at once when started is false (controller-runtime's answer for a
// cache not started yet) and otherwise waits until its context ends, as
// if the list never arrived within its polls.
type syncingCache struct {
	cache.Cache
	inf      *syncingInformer
	started  bool
	waiting  chan struct{} // closed when a blocking GetInformer waits
	canceled chan struct{} // closed when a blocking GetInformer gave up
}

type syncingInformer struct {
	cache.Informer
	synced chan struct{}
}

func (i *syncingInformer) HasSyncedChecker() toolscache.DoneChecker { return i }
func (i *syncingInformer) Name() string                             { return "test" }
func (i *syncingInformer) Done() <-chan struct{}                    { return i.synced }

func (c *syncingCache) GetInformer(ctx context.Context, _ client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	var o cache.InformerGetOptions
	for _, opt := range opts {
		opt(&o)
	}
	if (o.BlockUntilSynced != nil && !*o.BlockUntilSynced) || !c.started {
		return c.inf, nil
	}
	close(c.waiting)
	<-ctx.Done()
	close(c.canceled)
	return nil, errors.New("timed out waiting for the informer to sync")
}

// Acquire returns as soon as the informer's sync channel closes, without
// waiting for GetInformer's next poll, and stops its blocking GetInformer.
func TestAcquireReturnsOnTheSyncChannel(t *testing.T) {
	sc := &syncingCache{inf: &syncingInformer{synced: make(chan struct{})}, started: true, waiting: make(chan struct{}), canceled: make(chan struct{})}
	type result struct {
		inf cache.Informer
		err error
	}
	got := make(chan result, 1)
	go func() {
		inf, _, err := Acquire(context.Background(), sc, pods)
		got <- result{inf, err}
	}()
	<-sc.waiting // the informer has not synced when Acquire looks
	close(sc.inf.synced)
	r := <-got
	if r.err != nil || r.inf != cache.Informer(sc.inf) {
		t.Fatalf("Acquire = %v, %v; want the informer, no error", r.inf, r.err)
	}
	// The blocking GetInformer run beside the wait ends with it.
	<-sc.canceled
}

// On a cache not started yet, Acquire answers as GetInformer does: at
// once, although the informer has not synced.
func TestAcquireOnACacheNotStarted(t *testing.T) {
	sc := &syncingCache{inf: &syncingInformer{synced: make(chan struct{})}, canceled: make(chan struct{})}
	inf, release, err := Acquire(context.Background(), sc, pods)
	defer release()
	if err != nil || inf != cache.Informer(sc.inf) {
		t.Fatalf("Acquire = %v, %v; want the informer, no error", inf, err)
	}
}

// A wait that ends with its context gets GetInformer's error.
func TestAcquireSyncWaitBoundedByContext(t *testing.T) {
	sc := &syncingCache{inf: &syncingInformer{synced: make(chan struct{})}, started: true, waiting: make(chan struct{}), canceled: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Acquire(ctx, sc, pods); err == nil || err.Error() != "timed out waiting for the informer to sync" {
		t.Fatalf("Acquire with an ended context: %v; want GetInformer's error", err)
	}
}
