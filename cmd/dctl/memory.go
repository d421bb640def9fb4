package main

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

// defaultReleaseStartupAfter is how long after the manager's caches have
// synced dctl start and dctl run release their start-up pages
// (--release-startup-pages-after).
const defaultReleaseStartupAfter = 10 * time.Second

// releaseStartupPages returns the heap's free pages and unmaps the
// executable's pages that start-up touched (procmem.ReleaseStartupPages),
// unless after (--release-startup-pages-after) is 0 or less; when names
// the moment in the log. dctl start and dctl run release after each step
// of their start: once the packages are initialised and the flags read
// (before the manager is built), right before the manager starts (what
// building it touched), as soon as the caches have synced (what starting
// the API server, the informers and the controllers touched, before the
// first burst of work adds its own pages), and once more when after has
// passed since (what that first burst touched; see manageMemory). Each
// takes a few milliseconds; the executable's pages also leave the page
// cache, and a page used again is read from the file on its first access.
// Releasing between the steps keeps one step's pages from adding to the
// next one's: the peak RSS.
func releaseStartupPages(after time.Duration, when string, log logr.Logger) {
	if after <= 0 {
		return
	}
	before, now, err := procmem.ReleaseStartupPages()
	msg := "released the pages only start-up used"
	var kvs []any
	switch {
	case errors.Is(err, procmem.ErrTracerAttached):
		msg = "returned the heap's free pages; the executable's stay mapped"
		kvs = append(kvs, "reason", err.Error())
	case errors.Is(err, procmem.ErrPageCacheKept):
		msg = "released the pages only start-up used; the executable's stay in the page cache"
		kvs = append(kvs, "reason", err.Error())
	case err != nil:
		log.Error(err, "releasing the start-up pages", "when", when)
		return
	}
	log.V(1).Info(msg, append([]any{"when", when, "rssBytesBefore", before.Total, "rssBytesAfter", now.Total,
		"rssFileBytesBefore", before.File, "rssFileBytesAfter", now.File, "rssAnonBytesBefore", before.Anon, "rssAnonBytesAfter", now.Anon,
		"rssShmemBytesBefore", before.Shmem, "rssShmemBytesAfter", now.Shmem}, kvs...)...)
}

// manageMemory sets the Go memory limit from the cgroup's (see
// procmem.SetLimitFromCgroup) and releases the start-up pages (see
// releaseStartupPages) at once and, in a goroutine that ends with ctx,
// when the manager's caches have synced and again after has passed since.
// It is called right before the manager starts.
func manageMemory(ctx context.Context, mgr manager.Manager, after time.Duration, log logr.Logger) {
	procmem.SetLimitFromCgroup(log)
	if after <= 0 {
		return
	}
	releaseStartupPages(after, "before start", log)
	go func() {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return
		}
		releaseStartupPages(after, "caches synced", log)
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		releaseStartupPages(after, "after sync", log)
	}()
}
