// Package cputime reads the CPU time of the running process, which
// benchmarks report on shared machines: it counts the benchmark's own work,
// where wall time mixes in the other tenants' load.
package cputime
