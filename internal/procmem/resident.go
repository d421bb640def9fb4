package procmem

// Resident is a process's resident set in bytes, as /proc/self/status
// reports it: Total (VmRSS) is Anon (RssAnon: heap, stacks, the runtime's
// own memory) plus File (RssFile: mapped file pages, mostly the executable)
// plus Shmem (RssShmem: shared memory, which includes the pages of an
// executable run from a tmpfs such as /dev/shm).
type Resident struct {
	Total, Anon, File, Shmem int64
}
