//go:build !unix

package cputime

import "time"

// Process is not available on this platform: it returns 0 and false.
func Process() (time.Duration, bool) { return 0, false }
