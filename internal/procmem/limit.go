package procmem

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// LimitFraction is the part of the cgroup's memory limit that
// SetLimitFromCgroup gives the Go runtime: the rest is headroom for what
// the runtime does not count (C allocations, the kernel's page tables and
// socket buffers, the executable's mapped pages).
const LimitFraction = 0.9

// unlimited is the threshold above which a cgroup v1 limit means "no limit"
// (the kernel reports the largest page-aligned int64, 9223372036854771712).
const unlimited = int64(1) << 62

// CgroupLimit returns the memory limit in bytes that applies to the process
// whose /proc/self/cgroup is selfCgroup, read from fsys (the root file
// system: paths like "sys/fs/cgroup/memory.max", without a leading slash),
// and true; false when no limit is set or none can be read.
//
// cgroup v2 (the "0::/path" line): the smallest memory.max of the
// process's cgroup and its ancestors under sys/fs/cgroup ("max" means
// none). cgroup v1 (the line whose controllers include "memory"): the
// smallest memory.limit_in_bytes of the cgroup and its ancestors under
// sys/fs/cgroup/memory. In a container with its own cgroup namespace the
// path is "/" and the files are the mount's top ones. When the cgroup's
// directory is not under the mount (no cgroup namespace, the host's
// hierarchy not mounted), the mount's top file is read. The kernel's
// documentation of both versions is the source of these rules
// (Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/memory.rst).
func CgroupLimit(fsys fs.FS, selfCgroup []byte) (int64, bool) {
	v2, v1 := "", ""
	haveV2, haveV1 := false, false
	sc := bufio.NewScanner(bytes.NewReader(selfCgroup))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, haveV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1, haveV1 = parts[2], true
			}
		}
	}
	// A v1 memory controller, when mounted, is the one that limits: on a
	// hybrid host the v2 line names a hierarchy without it.
	if haveV1 {
		if l, ok := smallestLimit(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes"); ok {
			return l, true
		}
	}
	if haveV2 {
		return smallestLimit(fsys, "sys/fs/cgroup", v2, "memory.max")
	}
	return 0, false
}

// smallestLimit reads file in dir and each of its ancestors up to mount
// (dir is the cgroup path under mount) and returns the smallest limit.
func smallestLimit(fsys fs.FS, mount, cgroup, file string) (int64, bool) {
	dir := path.Join(mount, path.Clean("/"+cgroup))
	if _, err := fs.Stat(fsys, dir); err != nil {
		dir = mount
	}
	best, found := int64(0), false
	for {
		if l, ok := readLimit(fsys, path.Join(dir, file)); ok && (!found || l < best) {
			best, found = l, true
		}
		if dir == mount || !strings.HasPrefix(dir, mount+"/") {
			return best, found
		}
		dir = path.Dir(dir)
	}
}

// readLimit parses a memory.max or memory.limit_in_bytes file: a byte count,
// or "max" (v2) or a value near 2^63 (v1) for none.
func readLimit(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "" || s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false
	}
	return n, true
}

// SetLimitFromCgroup sets the Go runtime's soft memory limit to
// LimitFraction of the cgroup's memory limit (see CgroupLimit), unless the
// GOMEMLIMIT environment variable is set (the runtime has applied it) or no
// cgroup limit applies. An empty GOMEMLIMIT counts as not set, as it does
// for the runtime (which then applies no limit). It returns the limit it
// set in bytes, 0 when it set none, and logs what it did.
func SetLimitFromCgroup(log logr.Logger) int64 {
	return setLimitFromCgroup(log, os.Getenv("GOMEMLIMIT"), os.DirFS("/"), debug.SetMemoryLimit)
}

// setLimitFromCgroup is SetLimitFromCgroup with GOMEMLIMIT's value, the
// root file system (where it reads proc/self/cgroup and the cgroup's
// files) and the function that sets the limit given.
func setLimitFromCgroup(log logr.Logger, gomemlimit string, fsys fs.FS, set func(int64) int64) int64 {
	if gomemlimit != "" {
		log.V(1).Info("GOMEMLIMIT is set: the cgroup's memory limit is not consulted", "GOMEMLIMIT", gomemlimit)
		return 0
	}
	self, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return 0
	}
	limit, ok := CgroupLimit(fsys, self)
	if !ok {
		return 0
	}
	goLimit := int64(float64(limit) * LimitFraction)
	set(goLimit)
	log.Info("Go memory limit set from the cgroup's memory limit (set GOMEMLIMIT to choose another)",
		"cgroupLimitBytes", limit, "goMemoryLimitBytes", goLimit)
	return goLimit
}
