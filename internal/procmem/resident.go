package procmem

// Resident is a process's resident set in bytes, as /proc/self/status
// reports it: Total (VmRSS) is Anon (RssAnon: heap, stacks, the runtime's
// own memory) plus File (RssFile: mapped file pages, mostly the executable)
// plus shared memory.
type Resident struct {
	Total, Anon, File int64
}
