package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

// defaultReleaseStartupAfter is how long after the manager's caches have
// synced dctl start and dctl run release their start-up pages
// (--release-startup-pages-after).
const defaultReleaseStartupAfter = 10 * time.Second

// manageMemory sets the Go memory limit from the cgroup's (see
// procmem.SetLimitFromCgroup) and, unless after is 0 or less, releases the
// pages only start-up used (procmem.ReleaseStartupPages) twice: at once,
// before the manager starts (what package initialisation and set-up
// touched, so that the first burst of work after start does not add its
// pages on top of them: the peak RSS), and when the manager's caches have
// synced and after has passed (what the informers' start touched). It is
// called right before the manager starts; the second release waits in a
// goroutine that ends with ctx.
func manageMemory(ctx context.Context, mgr manager.Manager, after time.Duration, log logr.Logger) {
	procmem.SetLimitFromCgroup(log)
	if after <= 0 {
		return
	}
	release := func(when string) {
		before, now, err := procmem.ReleaseStartupPages()
		if err != nil {
			log.Error(err, "releasing the start-up pages", "when", when)
			return
		}
		log.V(1).Info("released the pages only start-up used", "when", when, "rssBytesBefore", before.Total, "rssBytesAfter", now.Total,
			"rssFileBytesBefore", before.File, "rssFileBytesAfter", now.File, "rssAnonBytesBefore", before.Anon, "rssAnonBytesAfter", now.Anon)
	}
	release("before start")
	go func() {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return
		}
		t := time.NewTimer(after)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		release("after sync")
	}()
}
