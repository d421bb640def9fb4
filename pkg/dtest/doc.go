// Package dtest reads and runs controller tests: files of the kind
// dcontroller.io/v1alpha1 Test that name operator files, a sequence of
// steps (objects applied or deleted) and, after each step, assertions on
// what the operators' targets hold (objects expected, with a partial match;
// objects expected absent; the exact set of names of a kind).
//
// The package parses and checks test files (Parse), finds them in
// directories (Discover), compares objects (Match) and runs tests through
// an evaluator it is given (Runner.Eval), so that a test computes its
// targets exactly as `dctl eval` does: the package evaluates nothing
// itself. It reports each test as a line, with the differing fields on a
// failure, and writes JUnit XML for CI systems (WriteJUnit).
//
// docs/testing.md is the reference of the file format.
package dtest
