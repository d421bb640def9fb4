//go:build unix

package controller

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) of this process so far: on a
// shared machine it measures the benchmark's own work, which wall time
// mixes with the other tenants' load.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
