//go:build !linux

package procmem

import (
	"errors"
)

// ReleaseStartupPages returns the Go heap's free pages to the operating
// system (runtime/debug.FreeOSMemory) when the live heap is at most
// StartupHeapMax, else its error wraps ErrHeapKept; unmapping the executable's pages is
// implemented on Linux only, and the resident set is not read: both
// Residents are zero.
func ReleaseStartupPages() (before, after Resident, err error) {
	return Resident{}, Resident{}, freeStartupHeap()
}

// ReadResident reads the process's resident set; on Linux only.
func ReadResident() (Resident, error) {
	return Resident{}, errors.New("procmem: the resident set is read from /proc/self/status, on Linux only")
}
