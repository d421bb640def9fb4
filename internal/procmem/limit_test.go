package procmem

import (
	"os"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr"
)

func TestCgroupLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	dir := &fstest.MapFile{Mode: 0o755 | 1<<31} // fs.ModeDir
	for _, tc := range []struct {
		name   string
		fs     fstest.MapFS
		cgroup string
		want   int64 // 0: none
	}{
		{"v2 in a container's own namespace", fstest.MapFS{"sys/fs/cgroup/memory.max": file("268435456\n")}, "0::/\n", 268435456},
		{"v2 without a limit", fstest.MapFS{"sys/fs/cgroup/memory.max": file("max\n")}, "0::/\n", 0},
		{"v2 nested: the parent's smaller limit applies", fstest.MapFS{
			"sys/fs/cgroup/kubepods/memory.max":      file("104857600\n"),
			"sys/fs/cgroup/kubepods/pod1":            dir,
			"sys/fs/cgroup/kubepods/pod1/memory.max": file("max\n"),
		}, "0::/kubepods/pod1\n", 104857600},
		{"v2 nested: the child's smaller limit applies", fstest.MapFS{
			"sys/fs/cgroup/a/memory.max":   file("200000000\n"),
			"sys/fs/cgroup/a/b/memory.max": file("100000000\n"),
		}, "0::/a/b\n", 100000000},
		{"v2 path not mounted: the mount's own file", fstest.MapFS{"sys/fs/cgroup/memory.max": file("50000000")}, "0::/elsewhere/x\n", 50000000},
		{"v1 unlimited", fstest.MapFS{"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n")}, "4:memory:/\n", 0},
		{"v1 limited, controllers joined", fstest.MapFS{
			"sys/fs/cgroup/memory/job/memory.limit_in_bytes": file("536870912\n"),
		}, "7:cpu,memory:/job\n1:name=systemd:/\n", 536870912},
		{"hybrid: v1 memory wins over the v2 line", fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("300000000\n"),
			"sys/fs/cgroup/memory.max":                   file("max\n"),
		}, "0::/\n4:memory:/\n", 300000000},
		{"hybrid: v1 unlimited, v2 limited", fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
			"sys/fs/cgroup/memory.max":                   file("400000000\n"),
		}, "0::/\n4:memory:/\n", 400000000},
		{"no files", fstest.MapFS{}, "0::/\n", 0},
		{"garbage", fstest.MapFS{"sys/fs/cgroup/memory.max": file("lots")}, "0::/\n", 0},
		{"no cgroup lines", fstest.MapFS{"sys/fs/cgroup/memory.max": file("1000")}, "", 0},
		{"path escaping the mount stays in it", fstest.MapFS{"sys/fs/cgroup/memory.max": file("1000")}, "0::/../../etc\n", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CgroupLimit(tc.fs, []byte(tc.cgroup))
			if ok != (tc.want != 0) || got != tc.want {
				t.Fatalf("CgroupLimit = %d, %v; want %d", got, ok, tc.want)
			}
		})
	}
}

func TestSetLimitFromCgroup(t *testing.T) {
	limited := fstest.MapFS{
		"proc/self/cgroup":         &fstest.MapFile{Data: []byte("0::/\n")},
		"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("1000000000\n")},
	}
	for _, tc := range []struct {
		name, gomemlimit string
		fs               fstest.MapFS
		want             int64 // 0: no limit set
	}{
		// The runtime treats an empty GOMEMLIMIT as unset: so does this.
		{"GOMEMLIMIT unset or empty", "", limited, 900000000},
		{"GOMEMLIMIT set", "256MiB", limited, 0},
		{"GOMEMLIMIT off", "off", limited, 0},
		{"no cgroup limit", "", fstest.MapFS{
			"proc/self/cgroup":         &fstest.MapFile{Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("max\n")},
		}, 0},
		{"no /proc/self/cgroup", "", fstest.MapFS{"sys/fs/cgroup/memory.max": &fstest.MapFile{Data: []byte("1000\n")}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := int64(0)
			got := setLimitFromCgroup(logr.Discard(), tc.gomemlimit, tc.fs, func(l int64) int64 { set = l; return 0 })
			if got != tc.want || set != tc.want {
				t.Fatalf("setLimitFromCgroup = %d, set the limit to %d; want %d", got, set, tc.want)
			}
		})
	}
}

// An empty GOMEMLIMIT in the environment is not a setting: the limit comes
// from the cgroup, when this process's has one.
func TestSetLimitFromCgroupEmptyGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	want := int64(0)
	if self, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		if l, ok := CgroupLimit(os.DirFS("/"), self); ok {
			want = int64(float64(l) * LimitFraction)
		}
	}
	if got := SetLimitFromCgroup(logr.Discard()); got != want {
		t.Fatalf("SetLimitFromCgroup with GOMEMLIMIT=\"\" = %d; want %d (from the cgroup)", got, want)
	}
	if want != 0 {
		if got := debug.SetMemoryLimit(-1); got != want {
			t.Fatalf("the Go memory limit is %d; want %d", got, want)
		}
	}
}
