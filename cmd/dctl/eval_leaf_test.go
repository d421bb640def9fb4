package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
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

// TestEvalCountsEveryError: an operator reports the first 10 errors of a
// step and "and N more errors"; the count covers all of them.
func TestEvalCountsEveryError(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: fails}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          quotient: {"@div": [1, 0]}
      target: {kind: Out}
`)
	var in []string
	for i := 0; i < 15; i++ {
		in = append(in, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d, namespace: default}\n", i))
	}
	input := writeFile(t, "in.yaml", strings.Join(in, "---\n"))
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "-f", op, "-i", input}, nil, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "division by zero"); n != 10 {
		t.Errorf("%d errors printed in full, want the first 10:\n%s", n, stderr.String())
	}
	if !strings.Contains(stderr.String(), "and 5 more errors") || !strings.Contains(stderr.String(), "15 error(s) while running the controllers") {
		t.Errorf("stderr does not count all 15 errors:\n%s", stderr.String())
	}
}
