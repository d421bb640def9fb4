package smallpages

import (
	"os"
	"strings"
	"testing"
)

// TestExecutableAdvised: after the package's init, every read-only mapping
// of the test binary carries VM_NOHUGEPAGE ("nh" in VmFlags of
// /proc/self/smaps) and none is mapped in huge pages.
func TestExecutableAdvised(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var cur string // header of the current mapping when it is one of exe's read-only ones
	checked := 0
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = ""
			if strings.Join(f[5:], " ") == exe && f[1][1] == '-' {
				cur = line
			}
			continue
		}
		if cur == "" || len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FilePmdMapped:":
			if f[1] != "0" {
				t.Errorf("%s: FilePmdMapped %s kB", cur, f[1])
			}
		case "VmFlags:":
			checked++
			if !strings.Contains(" "+strings.Join(f[1:], " ")+" ", " nh ") {
				t.Errorf("%s: VmFlags %v without nh", cur, f[1:])
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no read-only mapping of %s in /proc/self/smaps", exe)
	}
	if n := apply(); n != checked {
		t.Errorf("apply advised %d mappings, smaps lists %d", n, checked)
	}
}
