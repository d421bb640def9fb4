package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dtest"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/object"
)

type testOptions struct {
	junit    string
	run      string
	limits   limitFlags
	hookURLs []string
}

func newTestCommand() *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test [DIR|FILE ...]",
		Short: "Run controller tests: steps of inputs and the targets expected after each",
		Long: `test runs test files (apiVersion dcontroller.io/v1alpha1, kind Test; see
docs/testing.md) without a cluster. A test names operator files (Operators and
kro ResourceGraphDefinitions, or Metacontroller CompositeControllers and
DecoratorControllers with their CRDs, as dctl eval -f reads them; a webhook
hook is called at its URL or the one --hook-url gives) and a sequence of
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
  dctl test examples/webapp/webapp_test.yaml -run '^webapp' --junit report.xml

  # A hook controller whose webhook runs locally on port 8000
  dctl test examples/metacontroller-podservice --hook-url podservice-controller=http://127.0.0.1:8000`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTest(cmd.Context(), o, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&o.junit, "junit", "", "write a JUnit XML report to this file")
	cmd.Flags().StringVar(&o.run, "run", "", "run only the tests whose names match this regular expression (Go syntax)")
	cmd.Flags().StringArrayVar(&o.hookURLs, "hook-url", nil,
		"hook controllers: send a controller's hooks to another URL, NAME=URL, as dctl eval --hook-url; repeatable")
	o.limits.register(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 2, err: err} })
	return cmd
}

func runTest(ctx context.Context, o *testOptions, args []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	invalid := func(err error) error { return &exitError{code: 2, err: err} }
	urls, err := (&evalHookFlags{hookURLs: o.hookURLs}).urls()
	if err != nil {
		return invalid(err)
	}
	loader := &testLoader{limits: o.limits, hookURLs: urls, used: map[string]bool{}}
	r := &dtest.Runner{Out: stdout, Load: loader.load}
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
	for _, kv := range o.hookURLs {
		if k, _, _ := strings.Cut(kv, "="); !loader.used[k] {
			fmt.Fprintf(stderr, "warning: --hook-url %s: no test has a hook controller named %q\n", kv, strings.SplitN(k, "/", 2)[0])
		}
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

// testLoader reads a test's operator files as dctl eval -f does: Operators
// and ResourceGraphDefinitions, or hook controllers (with the CRDs they
// need), not both.
type testLoader struct {
	limits   limitFlags
	hookURLs map[string]string
	used     map[string]bool // the hookURLs keys a test's controller has
}

func (l *testLoader) load(files []string) (dtest.Evaluator, error) {
	hf, err := readHookControllers(files)
	if err != nil {
		return nil, err
	}
	if hf != nil {
		// --hook-url applies to the controllers of the tests that have
		// them; a name no test has is warned about after the run.
		urls := map[string]string{}
		for _, c := range hf.controllers {
			for k, u := range l.hookURLs {
				if name, _, _ := strings.Cut(k, "/"); name == c.GetName() {
					urls[k] = u
					l.used[k] = true
				}
			}
		}
		return &hookEvaluator{files: hf, urls: urls}, nil
	}
	var ops []*opv1a1.Operator
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		loaded, lcrds, err := readOperatorsAndCRDs(f)
		if err != nil {
			return nil, err
		}
		ops = append(ops, loaded...)
		crds = append(crds, lcrds...)
	}
	return &testEvaluator{ops: ops, crds: crds, limits: l.limits}, nil
}

// hookEvaluator runs a test's steps on hook controllers through
// metacontroller.Render, dctl eval's path for them. The inputs are folded
// first, as the API server would hold them: a later object replaces an
// earlier one of the same kind, namespace and name, and a deletion (a
// deletionTimestamp without finalizers) removes it; an object with
// finalizers and a deletionTimestamp stays, being deleted (a parent to
// finalize).
type hookEvaluator struct {
	files *hookFiles
	urls  map[string]string
}

func (e *hookEvaluator) Eval(ctx context.Context, inputs []*unstructured.Unstructured, where []string) (*dtest.Outcome, error) {
	type key struct{ gk, ns, name string }
	index := map[key]int{}
	var folded []*unstructured.Unstructured
	// A namespaced object without a namespace is in "default", as Render
	// (and kubectl) take it.
	mapper := metacontroller.OfflineRESTMapper(append(append([]*unstructured.Unstructured(nil), e.files.crds...), inputs...))
	for i, obj := range inputs {
		if err := object.ValidateMetadata(obj, obj.GetNamespace() != ""); err != nil {
			return nil, fmt.Errorf("%s: %w", where[i], err)
		}
		gvk := obj.GroupVersionKind()
		if m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); obj.GetNamespace() == "" && err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace {
			obj = obj.DeepCopy()
			obj.SetNamespace("default")
		}
		k := key{gvk.GroupKind().String(), obj.GetNamespace(), obj.GetName()}
		j, seen := index[k]
		if obj.GetDeletionTimestamp() != nil && len(obj.GetFinalizers()) == 0 {
			if seen {
				folded[j] = nil
				delete(index, k)
			}
			continue
		}
		if seen {
			folded[j] = obj
			continue
		}
		index[k] = len(folded)
		folded = append(folded, obj)
	}
	all := append([]*unstructured.Unstructured(nil), e.files.crds...)
	for _, o := range folded {
		if o != nil {
			all = append(all, o)
		}
	}
	res, rerr := metacontroller.Render(ctx, e.files.controllers, all, metacontroller.RenderOptions{HookURLs: e.urls})
	if res == nil {
		return nil, rerr
	}
	out := &dtest.Outcome{Objects: res.Objects, TargetKinds: hookTargetKinds(e.files.controllers, all)}
	if rerr != nil {
		for _, leaf := range leafErrors(rerr) {
			out.Errors = append(out.Errors, leaf.Error())
		}
	}
	return out, nil
}

// hookTargetKinds are the kinds hook controllers write: a
// CompositeController's parent (its status) and child resources, a
// DecoratorController's resources (labels, annotations) and attachments,
// mapped to kinds as Render maps them. A resource that does not map is
// left out (Render reports it).
func hookTargetKinds(controllers []client.Object, objs []*unstructured.Unstructured) []schema.GroupVersionKind {
	mapper := metacontroller.OfflineRESTMapper(objs)
	var rules []mcv1a1.ResourceRule
	for _, c := range controllers {
		switch c := c.(type) {
		case *mcv1a1.CompositeController:
			rules = append(rules, c.Spec.ParentResource.ResourceRule)
			for _, r := range c.Spec.ChildResources {
				rules = append(rules, r.ResourceRule)
			}
		case *mcv1a1.DecoratorController:
			for _, r := range c.Spec.Resources {
				rules = append(rules, r.ResourceRule)
			}
			for _, r := range c.Spec.Attachments {
				rules = append(rules, r.ResourceRule)
			}
		}
	}
	var kinds []schema.GroupVersionKind
	seen := map[schema.GroupVersionKind]bool{}
	for _, r := range rules {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			continue
		}
		gvk, err := mapper.KindFor(gv.WithResource(r.Resource))
		if err != nil || seen[gvk] {
			continue
		}
		seen[gvk] = true
		kinds = append(kinds, gvk)
	}
	return kinds
}

// testEvaluator runs a test's steps through evaluate, dctl eval's own path.
type testEvaluator struct {
	ops    []*opv1a1.Operator
	crds   []*apiextensionsv1.CustomResourceDefinition // of the RGDs
	limits limitFlags
}

func (e *testEvaluator) Eval(ctx context.Context, inputs []*unstructured.Unstructured, where []string) (*dtest.Outcome, error) {
	off, runErrs, err := evaluate(ctx, e.ops, e.crds, inputs, where, e.limits, false, io.Discard)
	if err != nil {
		return nil, err
	}
	// Each step is a run of its own: nothing of it outlives the step.
	defer off.Close()
	out := &dtest.Outcome{Objects: off.Result(), TargetKinds: off.TargetKinds()}
	for _, re := range runErrs {
		for _, leaf := range leafErrors(re) {
			out.Errors = append(out.Errors, leaf.Error())
		}
	}
	return out, nil
}
