// Package procmem sizes and trims a long-running dctl process's memory:
//
//   - [CgroupLimit] reads the memory limit of the process's control group
//     (cgroup v2 memory.max, v1 memory.limit_in_bytes), and
//     [SetLimitFromCgroup] sets the Go runtime's soft memory limit
//     (runtime/debug.SetMemoryLimit, the setting GOMEMLIMIT makes) to a
//     fraction of it when GOMEMLIMIT is not set (or is empty), so that the
//     garbage collector works harder before the container is killed for
//     memory instead of letting the heap grow to twice its live size.
//   - [ReleaseStartupPages] gives back, once start-up is over, the pages
//     that only start-up needed: it returns the heap's free pages to the
//     operating system (while the live heap is a start-up's, at most
//     [StartupHeapMax]) and unmaps the read-only pages of the executable
//     (code, read-only data, the function tables) that package
//     initialisation touched, and drops the executable's unmapped pages
//     from the kernel's page cache; a page used again is read again from
//     the file, alone (MADV_RANDOM: no read-ahead), on its first access.
//   - [ReleaseAfterLoad] returns the heap's free pages to the operating
//     system after a controller's start has processed a large initial
//     state (an Operator's source objects, a hook controller's parents and
//     children), once the process has settled, at most once a minute for
//     all controllers together.
package procmem
