package cputime

import (
	"runtime"
	"testing"
)

func TestProcessGrowsWithWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
			t.Fatal("CPU time not available on a unix platform")
		}
		return
	}
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i % 7
	}
	after, _ := Process()
	if after <= before || x == 0 {
		t.Fatalf("CPU time did not grow with work: %v -> %v", before, after)
	}
}
