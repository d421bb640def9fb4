package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dtest"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

type testOptions struct {
	junit  string
	run    string
	limits limitFlags
}

func newTestCommand() *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test [DIR|FILE ...]",
		Short: "Run controller tests: steps of inputs and the targets expected after each",
		Long: `test runs test files (apiVersion dcontroller.io/v1alpha1, kind Test; see
docs/testing.md) without a cluster. A test names operator files (Operators and
kro ResourceGraphDefinitions, as dctl eval -f reads them) and a sequence of
steps; each step applies objects and deletes objects, then asserts on the
targets: objects expected (only the fields given are compared), objects
expected absent, the exact set of names of a kind, and the errors the
controllers report. Each step is computed as dctl eval computes it, from
scratch on the inputs of that step and of every step before it.

A FILE argument is a test file; a DIR is searched recursively for files named
*_test.yaml (or .yml) and for the YAML files directly in directories named
tests. Without arguments, the current directory is searched.

The output is a line per test, "PASS name (0.012s)" or "FAIL name (0.012s)"
followed by the failed assertions (the spec path of the assertion, the
object, and the differing fields as "- expected" and "+ actual" lines), an
"ERROR <message>" line per invalid test or file, and a summary line
"N passed, N failed". With --junit, a JUnit XML report is written too.

Exit status: 0 when every test passed, 1 when a test failed, 2 on invalid
input (a test file that does not parse, an unknown kind or field, a
malformed step, a missing file, an operator that does not compile, an
assertion on a kind the operators do not write, no test file found).`,
		Example: `  # Every test under examples/
  dctl test examples/

  # One file, the tests whose names start with "webapp", a report for CI
  dctl test examples/webapp/webapp_test.yaml -run '^webapp' --junit report.xml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTest(cmd.Context(), o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.junit, "junit", "", "write a JUnit XML report to this file")
	cmd.Flags().StringVar(&o.run, "run", "", "run only the tests whose names match this regular expression (Go syntax)")
	o.limits.register(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func runTest(ctx context.Context, o *testOptions, args []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	invalid := func(err error) error { return &exitError{code: 2, err: err} }
	r := &dtest.Runner{Out: stdout, Load: (&testLoader{limits: o.limits}).load}
	if o.run != "" {
		re, err := regexp.Compile(o.run)
		if err != nil {
			return invalid(fmt.Errorf("--run: %w", err))
		}
		r.Run = re
	}
	if len(args) == 0 {
		args = []string{"."}
	}
	files, err := dtest.Discover(args)
	if err != nil {
		return invalid(err)
	}
	if len(files) == 0 {
		return invalid(fmt.Errorf("no test file (*_test.yaml, or a YAML file in a tests directory) under %v", args))
	}
	s := r.RunFiles(ctx, files)
	s.WriteSummary(stdout)
	if r.Run != nil && len(s.Results) == 0 {
		fmt.Fprintf(stderr, "warning: no test matches --run %q\n", o.run)
	}
	if o.junit != "" {
		if err := writeJUnitFile(o.junit, s); err != nil {
			return invalid(fmt.Errorf("--junit: %w", err))
		}
	}
	switch {
	case s.Invalid > 0:
		return invalid(fmt.Errorf("%d invalid test(s) or test file(s)", s.Invalid))
	case s.Failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("%d test(s) failed", s.Failed)}
	}
	return nil
}

func writeJUnitFile(path string, s *dtest.Summary) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := s.WriteJUnit(fh); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// testLoader reads a test's operator files as dctl eval -f does.
type testLoader struct{ limits limitFlags }

func (l *testLoader) load(files []string) (dtest.Evaluator, error) {
	var ops []*opv1a1.Operator
	for _, f := range files {
		if err := refuseHookControllers(f); err != nil {
			return nil, err
		}
		loaded, err := readOperatorsAndRGDs(f)
		if err != nil {
			return nil, err
		}
		ops = append(ops, loaded...)
	}
	return &testEvaluator{ops: ops, limits: l.limits}, nil
}

// refuseHookControllers says plainly that a CompositeController or
// DecoratorController is not something dctl eval runs offline, instead of
// the decoder's "expected kind Operator".
func refuseHookControllers(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	objs, err := operator.DecodeObjects(fh)
	fh.Close()
	if err != nil {
		return nil // readOperatorsAndRGDs reports it
	}
	for i, obj := range objs {
		if obj.GetAPIVersion() == mcv1a1.GroupVersion.String() {
			return fmt.Errorf("%s: object %d (%s %s): dctl eval, which runs the tests, does not run hook controllers offline; a test can name Operators and ResourceGraphDefinitions",
				path, i+1, obj.GetKind(), obj.GetName())
		}
	}
	return nil
}

// testEvaluator runs a test's steps through evaluate, dctl eval's own path.
type testEvaluator struct {
	ops    []*opv1a1.Operator
	limits limitFlags
}

func (e *testEvaluator) Eval(ctx context.Context, inputs []*unstructured.Unstructured, where []string) (*dtest.Outcome, error) {
	off, runErrs, err := evaluate(ctx, e.ops, inputs, where, e.limits, false, io.Discard)
	if err != nil {
		return nil, err
	}
	out := &dtest.Outcome{Objects: off.Result(), TargetKinds: off.TargetKinds()}
	for _, re := range runErrs {
		for _, leaf := range leafErrors(re) {
			out.Errors = append(out.Errors, leaf.Error())
		}
	}
	return out, nil
}
