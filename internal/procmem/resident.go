package procmem

import "errors"

// Resident is a process's resident set in bytes, as /proc/self/status
// reports it: Total (VmRSS) is Anon (RssAnon: heap, stacks, the runtime's
// own memory) plus File (RssFile: mapped file pages, mostly the executable)
// plus Shmem (RssShmem: shared memory, which includes the pages of an
// executable run from a tmpfs such as /dev/shm).
type Resident struct {
	Total, Anon, File, Shmem int64
}

// The errors of ReleaseStartupPages that say what it left undone, the rest
// being done (with ErrHeapKept, joined with either).
var (
	// ErrTracerAttached: a tracer is attached, the executable's pages
	// stay mapped.
	ErrTracerAttached = errors.New("a tracer is attached (TracerPid of /proc/self/status): the executable's pages stay mapped, for its breakpoints")
	// ErrPageCacheKept: the executable's pages were unmapped but stay in
	// the page cache; the error wrapping it gives the cause.
	ErrPageCacheKept = errors.New("the executable's pages stay in the page cache")
)
