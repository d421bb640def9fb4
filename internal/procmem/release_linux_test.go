package procmem

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestReadOnlyMappings(t *testing.T) {
	// Private_Dirty counts page cache pages not written back yet too:
	// the first two mappings stay candidates.
	field := func(anon, dirty string) string {
		return "Size:                  8 kB\nRss:                   8 kB\nPrivate_Dirty:         " + dirty +
			" kB\nAnonymous:             " + anon + " kB\nSwap:                  0 kB\nVmFlags: rd mr mw me\n"
	}
	smaps := "00400000-00600000 r-xp 00000000 fe:00 42 /usr/bin/dctl\n" + field("0", "1280") +
		"00600000-00800000 r--p 00200000 fe:00 42 /usr/bin/dctl\n" + field("0", "0") +
		// Relocated read-only data of a position-independent build:
		// private copies, made read-only after the relocation.
		"00800000-00808000 r--p 00400000 fe:00 42 /usr/bin/dctl\n" + field("8", "0") +
		"00808000-00810000 rw-p 00408000 fe:00 42 /usr/bin/dctl\n" + field("8", "8") +
		"00810000-00820000 rw-p 00000000 00:00 0\n" + field("8", "8") +
		"7f0000000000-7f0000100000 r-xp 00000000 fe:00 7 /lib/libc.so.6\n" + field("0", "0") +
		"7f0000200000-7f0000300000 r--p 00000000 fe:00 43 /usr/bin/dctl (deleted)\n" + field("0", "0")
	got := readOnlyMappings([]byte(smaps), "/usr/bin/dctl")
	want := []mapping{{0x400000, 0x600000}, {0x600000, 0x800000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyMappings = %x, want %x", got, want)
	}
	if got := readOnlyMappings([]byte(smaps), "/usr/bin/dctl (deleted)"); !reflect.DeepEqual(got, []mapping{{0x7f0000200000, 0x7f0000300000}}) {
		t.Fatalf("a replaced executable's mapping: %x", got)
	}
}

// TestReleaseStartupPages unmaps this test binary's read-only pages: its
// file-backed resident set must shrink, and the code must go on running
// (the pages come back on use).
func TestReleaseStartupPages(t *testing.T) {
	// A test binary just built has pages not yet written back, which
	// stay in the page cache until they are.
	if f, err := os.Open("/proc/self/exe"); err == nil {
		_ = f.Sync()
		f.Close()
	}
	cachedBefore, _ := cachedPages(t, "/proc/self/exe")
	forced := forcedCollections()
	before, after, err := ReleaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %+v, after: %+v", before, after)
	// The test's heap is a start-up's: its free pages were returned, which
	// debug.FreeOSMemory does after a forced collection.
	if n := forcedCollections() - forced; n != 1 {
		t.Errorf("%d forced collections during the release, want 1 (debug.FreeOSMemory)", n)
	}
	if before.File <= 0 || after.File >= before.File/2 {
		t.Fatalf("RssFile %d -> %d bytes: want less than half left", before.File, after.File)
	}
	// The executable left the page cache but for the pages mapped (in
	// use, or data not yet written to) and the folios that hold them (the
	// page cache may keep a file in folios of several pages).
	if cached, total := cachedPages(t, "/proc/self/exe"); cached*4 > cachedBefore*3 {
		t.Errorf("%d of the executable's %d pages are in the page cache after the release, %d before: want less than three quarters left", cached, total, cachedBefore)
	} else {
		t.Logf("pages of the executable in the page cache: %d before the release, %d after, of %d", cachedBefore, cached, total)
	}
	// Code, read-only data and the function tables are used again.
	if _, err := os.ReadFile("/proc/self/status"); err != nil {
		t.Fatal(err)
	}
	again, err := ReadResident()
	if err != nil || again.Total <= 0 {
		t.Fatalf("ReadResident after the release: %+v, %v", again, err)
	}
}

// TestReleaseStartupPagesLargeHeap runs the release in a copy of this
// test binary whose live heap is over StartupHeapMax: the release does not
// collect it (no forced collection) and says so with ErrHeapKept alone,
// and unmaps the executable's pages all the same.
func TestReleaseStartupPagesLargeHeap(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), releaseChildEnv+"="+largeHeapChild)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running the copy with a large heap: %v\n%s", err, out)
	}
	var errText string
	var fileBefore, fileAfter, forced int64
	line, _, _ := strings.Cut(string(out), "\n")
	if _, err := fmt.Sscanf(line, "release: err=%q rssFileBefore=%d rssFile=%d forced=%d", &errText, &fileBefore, &fileAfter, &forced); err != nil {
		t.Fatalf("the copy printed %q: %v", out, err)
	}
	if want := ErrHeapKept.Error() + " (96."; !strings.HasPrefix(errText, want) {
		t.Errorf("the release with a large heap returned %q, want it to start with %q", errText, want)
	}
	if forced != 0 {
		t.Errorf("%d forced collections during the release with a large heap, want none", forced)
	}
	if fileBefore <= 0 || fileAfter >= fileBefore/2 {
		t.Errorf("RssFile %d -> %d bytes with a large heap: want the executable's pages released all the same (less than half left)", fileBefore, fileAfter)
	}
	t.Logf("%s", line)
}

// largeHeapChild, as the value of releaseChildEnv, makes the copy hold a
// live heap of 1.5 StartupHeapMax (96 MiB) during its release.
const largeHeapChild = "large-heap"

// forcedCollections is the count of collections the program forced
// (runtime/metrics /gc/cycles/forced:gc-cycles).
func forcedCollections() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestTracerIn(t *testing.T) {
	for status, want := range map[string]bool{
		"Name:\tdctl\nTracerPid:\t0\nUid:\t0\n":    false,
		"Name:\tdctl\nTracerPid:\t4242\nUid:\t0\n": true,
		"Name:\tdctl\n": false,
	} {
		if got := tracerIn([]byte(status)); got != want {
			t.Errorf("tracerIn(%q) = %v, want %v", status, got, want)
		}
	}
}

// TestReleaseStartupPagesPIE runs TestReleaseStartupPages in a
// position-independent build of this package's tests, whose relocated
// read-only data are private copies: releasing them crashed the process
// with SIGSEGV before such mappings were left alone.
func TestReleaseStartupPagesPIE(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "procmem-pie.test")
	build := exec.Command("go", "test", "-c", "-buildmode=pie", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the tests with -buildmode=pie: %v\n%s", err, out)
	}
	run := exec.Command(bin, "-test.run", "^TestReleaseStartupPages$", "-test.v")
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReleaseStartupPages") {
		t.Fatalf("the release in a position-independent build: %v\n%s", err, out)
	}
}

// cachedPages maps the file at path and counts its pages in the page cache
// (mincore(2)) and in all.
func cachedPages(t *testing.T, path string) (cached, total int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for _, v := range vec {
		if v&1 != 0 {
			cached++
		}
	}
	return cached, len(vec)
}

// releaseChildEnv, set in a copy of this test binary's environment, makes
// its TestMain run one ReleaseStartupPages and print the error instead of
// the tests.
const releaseChildEnv = "DCTL_PROCMEM_RELEASE_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(releaseChildEnv); mode != "" {
		var live [][]byte
		if mode == largeHeapChild {
			for range 1024 {
				live = append(live, make([]byte, (StartupHeapMax+StartupHeapMax/2)/1024))
			}
			runtime.GC() // the live heap of the last collection is what the release reads
		}
		forced := forcedCollections()
		before, after, err := ReleaseStartupPages()
		if mode == largeHeapChild {
			fmt.Printf("release: err=%q rssFileBefore=%d rssFile=%d forced=%d\n", fmt.Sprint(err), before.File, after.File, forcedCollections()-forced)
		} else {
			fmt.Printf("release: err=%v rssFile=%d\n", err, after.File)
		}
		runtime.KeepAlive(live)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestReleaseStartupPagesUnreadableExecutable runs the release in a copy of
// this test binary that its user may execute but not read (mode 0111; as
// root the copy runs as nobody, whom the mode binds): the pages are
// unmapped and the error says that the page cache keeps them, and why.
func TestReleaseStartupPagesUnreadableExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is not searchable by others.
	dir, err := os.MkdirTemp("", "procmem-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "procmem.test")
	if err := os.WriteFile(bin, data, 0o111); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o111); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), releaseChildEnv+"=1")
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running the execute-only copy: %v\n%s", err, out)
	}
	if want := "release: err=" + ErrPageCacheKept.Error() + ": the executable is not readable (an execute-only file)"; !strings.Contains(string(out), want) {
		t.Fatalf("the release in an execute-only binary printed %q, want %q", out, want)
	}
}

// TestReleaseStartupPagesTraced runs the release in a copy of this test
// binary under ptrace (as a debugger or strace would trace it): the
// executable's pages stay mapped and the error says so.
func TestReleaseStartupPagesTraced(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// ptrace requests must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The child writes to a pipe (a file: no copying goroutine to wait
	// for, as its process is reaped here, not by cmd.Wait).
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), releaseChildEnv+"=1")
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// The child stops at its exec, then at every signal it gets; each
	// stop is waited for, then continued with the signal that caused it.
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatalf("wait4: %v", err)
		}
		if ws.Exited() || ws.Signaled() {
			break
		}
		sig := 0
		if ws.Stopped() && ws.StopSignal() != syscall.SIGTRAP {
			sig = int(ws.StopSignal())
		}
		if err := syscall.PtraceCont(pid, sig); err != nil {
			t.Fatalf("PTRACE_CONT: %v", err)
		}
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "release: err=" + ErrTracerAttached.Error(); !strings.Contains(string(out), want) {
		t.Fatalf("the release under a tracer printed %q, want %q", out, want)
	}
}
