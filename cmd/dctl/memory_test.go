package main

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

// TestReleaseLeft: what a start-up release left undone is logged with the
// release, each reason once; any other error is the release's failure.
func TestReleaseLeft(t *testing.T) {
	heap := fmt.Errorf("%w (96.0 MiB)", procmem.ErrHeapKept)
	cache := fmt.Errorf("%w: the executable is not readable (an execute-only file)", procmem.ErrPageCacheKept)
	madvise := errors.New("procmem: madvise(MADV_DONTNEED) of /usr/bin/dctl 400000-600000: invalid argument")
	for _, c := range []struct {
		err     error
		left    []string
		failure error
	}{
		{nil, nil, nil},
		{errors.Join(nil, nil), nil, nil},
		{errors.Join(heap, nil), []string{heap.Error()}, nil},
		{errors.Join(nil, procmem.ErrTracerAttached), []string{procmem.ErrTracerAttached.Error()}, nil},
		{errors.Join(heap, cache), []string{heap.Error(), cache.Error()}, nil},
		{errors.Join(heap, madvise), []string{heap.Error()}, madvise},
		{madvise, nil, madvise},
	} {
		left, failure := releaseLeft(c.err)
		if !slices.Equal(left, c.left) || (failure == nil) != (c.failure == nil) || (failure != nil && failure.Error() != c.failure.Error()) {
			t.Errorf("releaseLeft(%v) = %q, %v; want %q, %v", c.err, left, failure, c.left, c.failure)
		}
	}
}
