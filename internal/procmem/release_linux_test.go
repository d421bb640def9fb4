package procmem

import (
	"os"
	"reflect"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	maps := `00400000-00600000 r-xp 00000000 fe:00 42 /usr/bin/dctl
00600000-00800000 r--p 00200000 fe:00 42 /usr/bin/dctl
00800000-00810000 rw-p 00400000 fe:00 42 /usr/bin/dctl
00810000-00820000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r-xp 00000000 fe:00 7 /lib/libc.so.6
7f0000200000-7f0000300000 r--p 00000000 fe:00 43 /usr/bin/dctl (deleted)
`
	got := readOnlyMappings([]byte(maps), "/usr/bin/dctl")
	want := []mapping{{0x400000, 0x600000}, {0x600000, 0x800000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyMappings = %x, want %x", got, want)
	}
	if got := readOnlyMappings([]byte(maps), "/usr/bin/dctl (deleted)"); !reflect.DeepEqual(got, []mapping{{0x7f0000200000, 0x7f0000300000}}) {
		t.Fatalf("a replaced executable's mapping: %x", got)
	}
}

// TestReleaseStartupPages unmaps this test binary's read-only pages: its
// file-backed resident set must shrink, and the code must go on running
// (the pages come back on use).
func TestReleaseStartupPages(t *testing.T) {
	before, after, err := ReleaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %+v, after: %+v", before, after)
	if before.File <= 0 || after.File >= before.File/2 {
		t.Fatalf("RssFile %d -> %d bytes: want less than half left", before.File, after.File)
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
