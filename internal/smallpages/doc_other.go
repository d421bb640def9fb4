//go:build !linux

// Package smallpages does nothing on this system; on Linux, imported for
// its side effect, it keeps the executable's code and read-only data from
// being mapped in 2 MiB pages (see smallpages_linux.go).
package smallpages
