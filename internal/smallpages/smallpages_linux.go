// Package smallpages, imported for its side effect, keeps the running
// executable's code and read-only data from being mapped in 2 MiB pages:
// its init calls madvise(2) MADV_NOHUGEPAGE on every read-only mapping of
// /proc/self/exe listed in /proc/self/maps.
//
// Linux maps a file's pages in whole 2 MiB huge pages (FilePmdMapped in
// /proc/PID/smaps) when the page cache holds them as such, as it may for
// a binary just written; each fault then maps 2 MiB instead of the 64 KiB
// fault-around window, and the resident set of a program that touches a
// few pages here and there across a large binary (package initialisers,
// the first requests) grows by tens of MB more, by an amount that depends
// on the page cache's history. Go initialises packages in import-path
// order among those whose imports are initialised, so this package's
// init runs before those of k8s.io and sigs.k8s.io, which touch the most.
// It does nothing elsewhere than on Linux, and nothing if /proc is not
// mounted or madvise refuses (an old kernel).
package smallpages

import (
	"os"
	"strings"
	"syscall"

	"github.com/dcontroller/dcontroller/internal/procmem"
)

func init() { apply() }

// apply advises MADV_NOHUGEPAGE on the executable's read-only mappings;
// it returns how many it advised.
func apply() int {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(maps), "\n") {
		m, ok := procmem.ParseMapping(line, exe)
		if !ok || len(m.Perms) < 2 || m.Perms[1] != '-' {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.Start, m.End-m.Start, syscall.MADV_NOHUGEPAGE); e == 0 {
			n++
		}
	}
	return n
}
