package dtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

// Outcome is what the operators computed from the inputs of a step.
type Outcome struct {
	// Objects are every object of every target kind (dctl eval's output).
	Objects []*unstructured.Unstructured
	// TargetKinds are the kinds the operators write; assertions may only
	// name these.
	TargetKinds []schema.GroupVersionKind
	// Errors are the errors the controllers reported while running, one
	// per line.
	Errors []string
}

// Evaluator computes the targets of loaded operators.
type Evaluator interface {
	// Eval runs the operators from scratch on inputs, applied in order (an
	// object with metadata.deletionTimestamp is a deletion), as dctl eval
	// does; where[i] names inputs[i] in errors. The error is an invalid
	// input (the step is malformed); errors the controllers report while
	// running are in Outcome.Errors.
	Eval(ctx context.Context, inputs []*unstructured.Unstructured, where []string) (*Outcome, error)
}

// Loader reads and compiles the operator files of a test (paths already
// resolved against the test file's directory); the error is an invalid
// operator or a file that cannot be read.
type Loader func(operatorFiles []string) (Evaluator, error)

// Runner runs test files.
type Runner struct {
	// Load makes the evaluator of a test's operators. Required.
	Load Loader
	// Out receives a line per test (`PASS name (0.012s)`, `FAIL ...`, or
	// `ERROR <message>` for an invalid test or file) and, after a FAIL,
	// the failures, indented. nil: io.Discard.
	Out io.Writer
	// Run, when set, selects the tests whose names it matches.
	Run *regexp.Regexp
}

// Result is the outcome of one test, or of a test file that could not be
// read (Name empty).
type Result struct {
	File, Name string
	Duration   time.Duration
	// Failures are the failed assertions, each a readable report naming
	// the step and the assertion (several lines; indented by the reporter).
	Failures []string
	// Err is set for an invalid test: it did not run to the end.
	Err error
}

// Summary is the outcome of a run.
type Summary struct {
	Results                 []Result
	Passed, Failed, Invalid int
}

// deletionTime is the metadata.deletionTimestamp of the objects a step's
// delete entry turns into (any time would do: it marks a deletion).
const deletionTime = "2000-01-01T00:00:00Z"

// RunFiles runs every test of files, in order, and reports each on Out as
// it finishes.
func (r *Runner) RunFiles(ctx context.Context, files []string) *Summary {
	out := r.Out
	if out == nil {
		out = io.Discard
	}
	s := &Summary{}
	record := func(res Result) {
		s.Results = append(s.Results, res)
		switch {
		case res.Err != nil:
			s.Invalid++
			fmt.Fprintf(out, "ERROR %v\n", res.Err)
		case len(res.Failures) > 0:
			s.Failed++
			fmt.Fprintf(out, "FAIL %s (%s)\n", res.Name, seconds(res.Duration))
			for _, f := range res.Failures {
				fmt.Fprint(out, indent(f, "    "))
			}
		default:
			s.Passed++
			fmt.Fprintf(out, "PASS %s (%s)\n", res.Name, seconds(res.Duration))
		}
	}
	for _, f := range files {
		tests, err := readTestFile(f)
		if err != nil {
			record(Result{File: f, Err: err})
			continue
		}
		for _, t := range tests {
			if r.Run != nil && !r.Run.MatchString(t.Metadata.Name) {
				continue
			}
			record(r.runTest(ctx, t))
		}
	}
	return s
}

// WriteSummary writes `N passed, N failed` (and `, N invalid` when a test
// or file was invalid) as one line.
func (s *Summary) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "%d passed, %d failed", s.Passed, s.Failed)
	if s.Invalid > 0 {
		fmt.Fprintf(w, ", %d invalid", s.Invalid)
	}
	fmt.Fprintln(w)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString(prefix + l)
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

func readTestFile(path string) ([]*Test, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(data, path)
}

// expectation is one object a step expects, with the words that name it in
// a report.
type expectation struct {
	obj  map[string]any
	path string // spec.steps[i].expect[j]
	from string // "FILE: object N" for an object of a file
}

// loadedStep is a step with its files read.
type loadedStep struct {
	inputs []*unstructured.Unstructured
	where  []string
	expect []expectation
}

// runTest runs one test: the steps, each from scratch on the inputs of
// the steps so far.
func (r *Runner) runTest(ctx context.Context, t *Test) Result {
	start := time.Now()
	res := Result{File: t.File, Name: t.Metadata.Name}
	fail := func(err error) Result {
		res.Err = fmt.Errorf("%s: test %q: %w", t.File, t.Metadata.Name, err)
		res.Duration = time.Since(start)
		return res
	}
	dir := filepath.Dir(t.File)
	var opFiles []string
	for i, f := range t.Spec.Operators {
		p := resolve(dir, f)
		if _, err := os.Stat(p); err != nil {
			return fail(fmt.Errorf("spec.operators[%d]: %w", i, err))
		}
		opFiles = append(opFiles, p)
	}
	steps := make([]loadedStep, len(t.Spec.Steps))
	for i := range t.Spec.Steps {
		if err := loadStep(t, dir, i, &steps[i]); err != nil {
			return fail(err)
		}
	}
	ev, err := r.Load(opFiles)
	if err != nil {
		return fail(fmt.Errorf("spec.operators: %w", err))
	}
	var inputs []*unstructured.Unstructured
	var where []string
	for i := range t.Spec.Steps {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		st := &t.Spec.Steps[i]
		path := fmt.Sprintf("spec.steps[%d]", i)
		inputs = append(inputs, steps[i].inputs...)
		where = append(where, steps[i].where...)
		out, err := ev.Eval(ctx, inputs, where)
		if err != nil {
			// An input's error names it by its where; an operator's, by
			// the operator.
			return fail(err)
		}
		if err := checkKinds(st, &steps[i], path, out.TargetKinds); err != nil {
			return fail(err)
		}
		res.Failures = append(res.Failures, assertStep(st, &steps[i], path, out)...)
	}
	res.Duration = time.Since(start)
	return res
}

func resolve(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// loadStep reads the files of step i and turns its entries into eval
// inputs and expectations.
func loadStep(t *Test, dir string, i int, ls *loadedStep) error {
	st := &t.Spec.Steps[i]
	path := fmt.Sprintf("spec.steps[%d]", i)
	for j := range st.Apply {
		p := fmt.Sprintf("%s.apply[%d]", path, j)
		objs, names, err := readObjects(&st.Apply[j], dir, p)
		if err != nil {
			return err
		}
		for k, o := range objs {
			w := p + ".object"
			if st.Apply[j].File != "" {
				w = fmt.Sprintf("%s (%s)", p, names[k])
			}
			ls.inputs = append(ls.inputs, &unstructured.Unstructured{Object: o})
			ls.where = append(ls.where, w)
		}
	}
	for j, d := range st.Delete {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": d.APIVersion, "kind": d.Kind,
			"metadata": map[string]any{"name": d.Name, "deletionTimestamp": deletionTime},
		}}
		if d.Namespace != "" {
			obj.SetNamespace(d.Namespace)
		}
		ls.inputs = append(ls.inputs, obj)
		ls.where = append(ls.where, fmt.Sprintf("%s.delete[%d]", path, j))
	}
	for j := range st.Expect {
		p := fmt.Sprintf("%s.expect[%d]", path, j)
		objs, names, err := readObjects(&st.Expect[j], dir, p)
		if err != nil {
			return err
		}
		for k, o := range objs {
			e := expectation{obj: o, path: p}
			if st.Expect[j].File != "" {
				e.from = names[k]
			}
			ls.expect = append(ls.expect, e)
		}
	}
	return nil
}

// readObjects returns the objects of an Objects entry at path p of a test
// file, and for the objects of a file the words naming each ("FILE: object
// N").
func readObjects(o *Objects, dir, p string) ([]map[string]any, []string, error) {
	if o.File == "" {
		m, err := o.Decode()
		if err != nil {
			return nil, nil, fmt.Errorf("%s.object: %w", p, err)
		}
		return []map[string]any{m}, []string{""}, nil
	}
	f := resolve(dir, o.File)
	fh, err := os.Open(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s.file: %w", p, err)
	}
	objs, err := operator.DecodeObjects(fh)
	fh.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s.file: %s: %w", p, f, err)
	}
	var out []map[string]any
	var names []string
	for k, obj := range objs {
		out = append(out, obj.Object)
		names = append(names, fmt.Sprintf("%s: object %d", f, k+1))
	}
	return out, names, nil
}

// checkKinds refuses an assertion on a kind the operators do not write:
// only targets are in the outcome, so it could only pass vacuously (a
// misspelt kind, a source kind).
func checkKinds(st *Step, ls *loadedStep, path string, targets []schema.GroupVersionKind) error {
	known := map[string]bool{}
	var names []string
	for _, g := range targets {
		av, k := g.ToAPIVersionAndKind()
		known[av+" "+k] = true
		names = append(names, av+" "+k)
	}
	check := func(p, apiVersion, kind string) error {
		if known[apiVersion+" "+kind] {
			return nil
		}
		return fmt.Errorf("%s: %s %s is not a kind the operators write (their targets: %s); a test asserts on targets only",
			p, apiVersion, kind, strings.Join(names, ", "))
	}
	for _, e := range ls.expect {
		p := e.path
		if e.from != "" {
			p += " (" + e.from + ")"
		}
		if err := check(p, str(e.obj["apiVersion"]), str(e.obj["kind"])); err != nil {
			return err
		}
	}
	for j, a := range st.Absent {
		if err := check(fmt.Sprintf("%s.absent[%d]", path, j), a.APIVersion, a.Kind); err != nil {
			return err
		}
	}
	for j, k := range st.Exactly {
		if err := check(fmt.Sprintf("%s.exactly[%d]", path, j), k.APIVersion, k.Kind); err != nil {
			return err
		}
	}
	return nil
}

type objectID struct{ apiVersion, kind, namespace, name string }

func (id objectID) String() string {
	if id.namespace == "" {
		return fmt.Sprintf("%s %s %s", id.apiVersion, id.kind, id.name)
	}
	return fmt.Sprintf("%s %s %s/%s", id.apiVersion, id.kind, id.namespace, id.name)
}

// assertStep checks a step's assertions on its outcome and returns the
// failures, each beginning with the spec path of the assertion, the step's
// name and the file object it comes from.
func assertStep(st *Step, ls *loadedStep, path string, out *Outcome) []string {
	head := func(p, from string) string {
		var notes []string
		if st.Name != "" {
			notes = append(notes, fmt.Sprintf("step %q", st.Name))
		}
		if from != "" {
			notes = append(notes, from)
		}
		if len(notes) > 0 {
			p += " (" + strings.Join(notes, "; ") + ")"
		}
		return p
	}
	var failures []string
	byID := map[objectID]map[string]any{}
	byKind := map[[2]string][]string{} // "namespace/name" per apiVersion and kind
	for _, o := range out.Objects {
		id := objectID{o.GetAPIVersion(), o.GetKind(), o.GetNamespace(), o.GetName()}
		byID[id] = o.Object
		k := [2]string{id.apiVersion, id.kind}
		byKind[k] = append(byKind[k], setName(id.namespace, id.name))
	}
	failures = append(failures, checkErrors(st.Errors, out.Errors, head(path+".errors", ""))...)
	for _, e := range ls.expect {
		ns, _ := nested(e.obj, "metadata", "namespace").(string)
		id := objectID{str(e.obj["apiVersion"]), str(e.obj["kind"]), ns, str(nested(e.obj, "metadata", "name"))}
		actual, ok := byID[id]
		if !ok {
			have := byKind[[2]string{id.apiVersion, id.kind}]
			failures = append(failures, fmt.Sprintf("%s %s: expected, not found (objects of the kind: %s)\n",
				head(e.path, e.from), id, list(have)))
			continue
		}
		if diffs := Match(e.obj, actual, ""); len(diffs) > 0 {
			failures = append(failures, fmt.Sprintf("%s %s: differs\n%s",
				head(e.path, e.from), id, FormatDifferences(diffs, "  ")))
		}
	}
	for j, a := range st.Absent {
		id := objectID{a.APIVersion, a.Kind, a.Namespace, a.Name}
		if _, ok := byID[id]; ok {
			failures = append(failures, fmt.Sprintf("%s %s: expected absent, exists\n", head(fmt.Sprintf("%s.absent[%d]", path, j), ""), id))
		}
	}
	for j, k := range st.Exactly {
		want := map[string]bool{}
		for _, n := range k.Names {
			if !strings.Contains(n, "/") {
				n = "/" + n
			}
			want[n] = true
		}
		var extra, missing []string
		have := map[string]bool{}
		for _, n := range byKind[[2]string{k.APIVersion, k.Kind}] {
			full := n
			if !strings.Contains(n, "/") {
				full = "/" + n
			}
			if k.Namespace != "" && !strings.HasPrefix(full, k.Namespace+"/") {
				continue
			}
			have[full] = true
			if !want[full] {
				extra = append(extra, n)
			}
		}
		for _, n := range k.Names {
			full := n
			if !strings.Contains(n, "/") {
				full = "/" + n
			}
			if !have[full] {
				missing = append(missing, n)
			}
		}
		if len(extra)+len(missing) > 0 {
			what := k.APIVersion + " " + k.Kind
			if k.Namespace != "" {
				what += " in namespace " + k.Namespace
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s: the set differs\n", head(fmt.Sprintf("%s.exactly[%d]", path, j), ""), what)
			for _, n := range missing {
				fmt.Fprintf(&b, "  - %s (expected, missing)\n", n)
			}
			for _, n := range extra {
				fmt.Fprintf(&b, "  + %s (not expected)\n", n)
			}
			failures = append(failures, b.String())
		}
	}
	return failures
}

func setName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// list renders names, at most 10 of them.
func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// checkErrors compares the errors the controllers reported with the
// substrings a step expects.
func checkErrors(want, got []string, label string) []string {
	var b strings.Builder
	for _, g := range got {
		ok := false
		for _, w := range want {
			if strings.Contains(g, w) {
				ok = true
				break
			}
		}
		if !ok {
			fmt.Fprintf(&b, "  + %s\n", g)
		}
	}
	for _, w := range want {
		ok := false
		for _, g := range got {
			if strings.Contains(g, w) {
				ok = true
				break
			}
		}
		if !ok {
			fmt.Fprintf(&b, "  - %q (expected, not reported)\n", w)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: the controllers' errors differ\n%s", label, b.String())}
}
