package procmem

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ReleaseStartupPages returns the Go heap's free pages to the operating
// system (runtime/debug.FreeOSMemory, which collects garbage first) when
// the live heap is a start-up's (at most StartupHeapMax) and
// unmaps every read-only mapping of the running executable
// (madvise(2) MADV_DONTNEED on the mappings of /proc/self/exe in
// /proc/self/smaps without write permission: code, read-only data, the
// function tables). Writable mappings (data, bss) are never touched, nor
// a read-only one holding any page that is not the file's (anonymous or
// swapped: the relocated read-only data of a position-independent build):
// there MADV_DONTNEED would discard the process's changes.
//
// Unmapping a clean, read-only file mapping loses nothing: a page used
// again is mapped again on its first access. What stays unmapped is what
// start-up alone used: the package initialisers of the whole binary.
//
// The executable's pages also leave the page cache (posix_fadvise(2)
// POSIX_FADV_DONTNEED on /proc/self/exe: the kernel drops the clean pages
// that no process maps), and its read-only mappings are advised
// MADV_RANDOM, so that a page used again is read from the file alone, with
// no read-ahead around it. Otherwise a fault maps every cached page of the
// 64 KiB window around the touched one (fault-around, a system setting
// that MADV_RANDOM does not change), and a binary whose every page is
// cached (just built, or read ahead at start) grows back to tens of MB
// resident for the few hundred pages in use; the page cache, which a
// container's memory accounting counts as well, holds the whole file. The
// price is a read from the file on the first use of each page after a
// release.
//
// While a tracer (a debugger, strace) is attached (TracerPid of
// /proc/self/status), the executable's mappings are left alone, and the
// error is ErrTracerAttached: a debugger's breakpoints are private copies
// of code pages, which MADV_DONTNEED would drop. Breakpoints that do not
// show as a tracer (uprobes) may be lost. When the executable's pages
// cannot be dropped from the page cache (it cannot be opened for reading,
// as an execute-only file of mode 0111, or its file system refuses the
// advice), its mappings are released all the same and the error wraps
// ErrPageCacheKept with the cause. A later reader of the file (a dctl command,
// another process running it) also brings its pages back to the page
// cache, from where a fault maps them 64 KiB at a time again until the
// next release. An executable on a tmpfs (/dev/shm) is memory itself:
// its pages count as RssShmem and cannot leave.
//
// It returns the resident set (VmRSS, RssAnon, RssFile and RssShmem of
// /proc/self/status, bytes) before and after, and an error: what it left
// undone, the rest being done (ErrHeapKept, joined with one of the two
// above when both apply), or one naming the mapping madvise refused or the
// file that could not be read.
func ReleaseStartupPages() (before, after Resident, err error) {
	before, err = ReadResident()
	if err != nil {
		return before, before, err
	}
	heapKept := freeStartupHeap()
	after, err = releaseExecutable(before)
	return before, after, errors.Join(heapKept, err)
}

// releaseExecutable unmaps the executable's read-only mappings and drops
// its pages from the page cache (see ReleaseStartupPages), and returns the
// resident set after, or before when it fails early.
func releaseExecutable(before Resident) (after Resident, err error) {
	if traced, err := tracerAttached(); err != nil || traced {
		// A debugger's breakpoints are private copies of code pages,
		// which MADV_DONTNEED would drop.
		after, rerr := ReadResident()
		if err == nil {
			err = rerr
		}
		if err == nil {
			err = ErrTracerAttached
		}
		return after, err
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return before, fmt.Errorf("procmem: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return before, fmt.Errorf("procmem: %w", err)
	}
	for _, m := range readOnlyMappings(smaps, exe) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED); e != 0 {
			return before, fmt.Errorf("procmem: madvise(MADV_DONTNEED) of %s %x-%x: %w", exe, m.start, m.end, e)
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_RANDOM); e != 0 {
			return before, fmt.Errorf("procmem: madvise(MADV_RANDOM) of %s %x-%x: %w", exe, m.start, m.end, e)
		}
	}
	if err := dropFromPageCache("/proc/self/exe"); err != nil {
		after, _ = ReadResident()
		if errors.Is(err, fs.ErrPermission) {
			err = errors.New("the executable is not readable (an execute-only file)")
		}
		return after, fmt.Errorf("%w: %w", ErrPageCacheKept, err)
	}
	return ReadResident()
}

// dropFromPageCache asks the kernel to drop the file's clean pages that no
// process maps from the page cache (posix_fadvise(2) POSIX_FADV_DONTNEED);
// dirty pages are written back first and stay until then. The error names
// the file.
func dropFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("procmem: %w", err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("procmem: posix_fadvise(POSIX_FADV_DONTNEED) of %s: %w", path, err)
	}
	return nil
}

// mapping is an address range of /proc/self/maps.
type mapping struct{ start, end uintptr }

// readOnlyMappings returns the mappings of file in smaps (the text of
// /proc/self/smaps: a header line "start-end perms offset dev inode path"
// per mapping, then "Field: value kB" lines) that are not writable and
// hold only pages of the file: none anonymous (a private copy, such as the
// relocated read-only data of a position-independent executable, written
// before being made read-only) and none swapped out (only such copies
// swap). Dropping those would lose what the process wrote; a mapping with
// any is left whole. (Private_Dirty does not tell: it also counts page
// cache pages not yet written back, of a binary just built.)
func readOnlyMappings(smaps []byte, file string) []mapping {
	var out []mapping
	var cur mapping
	ok := false // cur is a candidate
	flush := func() {
		if ok {
			out = append(out, cur)
		}
		ok = false
	}
	sc := bufio.NewScanner(strings.NewReader(string(smaps)))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if k, v, isField := strings.Cut(f[0], ":"); isField && v == "" && !strings.Contains(k, "-") {
			// A field of the current mapping.
			if ok && (k == "Anonymous" || k == "Swap") && len(f) >= 2 && f[1] != "0" {
				ok = false
			}
			continue
		}
		flush()
		m, isFile := ParseMapping(line, file)
		if !isFile || len(m.Perms) < 2 || m.Perms[0] != 'r' || m.Perms[1] != '-' {
			continue
		}
		cur, ok = mapping{m.Start, m.End}, true
	}
	flush()
	return out
}

// Mapping is one mapping of /proc/PID/maps: its address range and its
// permissions ("r-xp": read, write, execute, private or shared).
type Mapping struct {
	Start, End uintptr
	Perms      string
}

// ParseMapping reads a mapping's header line of /proc/PID/maps or smaps
// ("start-end perms offset dev inode path", proc(5)) and reports whether
// it is a mapping of file (the path as /proc/self/exe links to it) with
// a valid range.
func ParseMapping(line, file string) (Mapping, bool) {
	f := strings.Fields(line)
	if len(f) < 6 || strings.Join(f[5:], " ") != file {
		return Mapping{}, false
	}
	lo, hi, cut := strings.Cut(f[0], "-")
	if !cut {
		return Mapping{}, false
	}
	a, err1 := strconv.ParseUint(lo, 16, 64)
	b, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || b <= a {
		return Mapping{}, false
	}
	return Mapping{Start: uintptr(a), End: uintptr(b), Perms: f[1]}, true
}

// ReadResident reads the process's resident set from /proc/self/status.
func ReadResident() (Resident, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return Resident{}, fmt.Errorf("procmem: %w", err)
	}
	var r Resident
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &r.Total
		case "RssAnon":
			dst = &r.Anon
		case "RssFile":
			dst = &r.File
		case "RssShmem":
			dst = &r.Shmem
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Resident{}, fmt.Errorf("procmem: /proc/self/status %s: %w", k, err)
		}
		*dst = kb << 10
	}
	return r, nil
}

// tracerAttached reports whether /proc/self/status names a tracer.
func tracerAttached() (bool, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, fmt.Errorf("procmem: %w", err)
	}
	return tracerIn(b), nil
}

// tracerIn reports whether the text of a /proc/PID/status has a TracerPid
// other than 0.
func tracerIn(status []byte) bool {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return false
}
