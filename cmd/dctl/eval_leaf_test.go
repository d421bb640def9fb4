package main

import (
	"errors"
	"fmt"
	"testing"
)

// TestLeafErrors: joined errors, nested and behind a wrapping prefix, are
// split into one error per leaf, each with the prefix.
func TestLeafErrors(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	err := errors.Join(
		fmt.Errorf("operator \"x\": controller \"y\": %w", errors.Join(a, errors.Join(b, nil))),
		fmt.Errorf("single: %w", c),
	)
	got := leafErrors(err)
	want := []string{`operator "x": controller "y": a`, `operator "x": controller "y": b`, "single: c"}
	if len(got) != len(want) {
		t.Fatalf("leafErrors = %q, want %q", got, want)
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Fatalf("leafErrors = %q, want %q", got, want)
		}
	}
	if !errors.Is(got[1], b) {
		t.Error("a leaf does not wrap its error")
	}
}
