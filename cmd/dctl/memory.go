package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

// defaultReleaseStartupAfter is how long after the manager's caches have
// synced dctl start and dctl run release their start-up pages
// (--release-startup-pages-after).
const defaultReleaseStartupAfter = 10 * time.Second

// releaseStartupPages returns the heap's free pages (while the live heap
// is a start-up's: procmem.StartupHeapMax) and unmaps the executable's
// pages that start-up touched (procmem.ReleaseStartupPages),
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
	left, failure := releaseLeft(err)
	if failure != nil {
		log.Error(failure, "releasing the start-up pages", "when", when)
		return
	}
	kvs := []any{"when", when, "rssBytesBefore", before.Total, "rssBytesAfter", now.Total,
		"rssFileBytesBefore", before.File, "rssFileBytesAfter", now.File, "rssAnonBytesBefore", before.Anon, "rssAnonBytesAfter", now.Anon,
		"rssShmemBytesBefore", before.Shmem, "rssShmemBytesAfter", now.Shmem}
	if len(left) > 0 {
		kvs = append(kvs, "left", strings.Join(left, "; "))
	}
	log.V(1).Info("released the pages only start-up used", kvs...)
}

// releaseLeft splits the error of procmem.ReleaseStartupPages into what
// the release left undone, the rest being done (the messages of its
// errors wrapping ErrHeapKept, ErrTracerAttached or ErrPageCacheKept), and
// a failure (any other error, joined).
func releaseLeft(err error) (left []string, failure error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		switch {
		case e == nil:
		case errors.Is(e, procmem.ErrHeapKept), errors.Is(e, procmem.ErrTracerAttached), errors.Is(e, procmem.ErrPageCacheKept):
			left = append(left, e.Error())
		default:
			failure = errors.Join(failure, e)
		}
	}
	return left, failure
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
		releaseStartupPages(after, after.String()+" after sync", log)
	}()
}
