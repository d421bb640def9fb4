package main

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dtest"
)

// TestDctlTestExamples runs `dctl test examples/`: every example's expected
// results, kept as a Test, pass, and every example has one. The webhook
// PodService's hook, a Python web server, runs locally (--hook-url).
func TestDctlTestExamples(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	junit := filepath.Join(t.TempDir(), "report.xml")
	hook := startPodServiceHook(t)
	code := Execute([]string{"test", "../../examples", "--junit", junit, "--hook-url", "podservice-controller=" + hook}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	n := 0
	for _, d := range dirs {
		name := filepath.Base(d)
		n++
		tests, _ := filepath.Glob(filepath.Join(d, "*_test.yaml"))
		more, _ := filepath.Glob(filepath.Join(d, "tests", "*.yaml"))
		if len(tests)+len(more) == 0 {
			t.Errorf("example %s has no test (%s_test.yaml or tests/)", name, name)
		}
		if !strings.Contains(stdout.String(), "PASS "+name+" (") {
			t.Errorf("no PASS line for %s:\n%s", name, stdout.String())
		}
	}
	if want := "\n" + strconv.Itoa(n) + " passed, 0 failed\n"; !strings.HasSuffix(stdout.String(), want[1:]) {
		t.Errorf("summary: want %q at the end of:\n%s", want[1:], stdout.String())
	}
	report := readJUnit(t, junit)
	if report.Tests != n || report.Failures != 0 || report.Errors != 0 {
		t.Errorf("JUnit report: %d tests, %d failures, %d errors; want %d, 0, 0", report.Tests, report.Failures, report.Errors, n)
	}
}

func readJUnit(t *testing.T, path string) *dtest.JUnitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var report dtest.JUnitSuites
	if err := xml.Unmarshal(b, &report); err != nil {
		t.Fatalf("JUnit report does not parse: %v\n%s", err, b)
	}
	return &report
}

// annotatorTest is a test of the annotator example, with a placeholder for
// the container number expected after the second step.
func annotatorTest(t *testing.T, num string) string {
	t.Helper()
	dir, err := filepath.Abs(annotator)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "annotator_test.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Test
metadata: {name: annotator}
spec:
  operators: [`+dir+`/operator.yaml]
  steps:
    - apply: [{file: `+dir+`/input.yaml}]
      expect: [{file: `+dir+`/expected.yaml}]
    - name: two containers
      apply:
        - object:
            apiVersion: v1
            kind: Pod
            metadata: {name: net-debug, namespace: default}
            spec: {containers: [{name: a, image: x}, {name: b, image: x}]}
      expect:
        - object:
            apiVersion: v1
            kind: Pod
            metadata:
              name: net-debug
              namespace: default
              annotations: {dcontroller.io/container-num: "`+num+`"}
            spec: {containers: [{name: a}, {name: b}]}
      exactly:
        - {apiVersion: v1, kind: Pod, namespace: default, names: [default/net-debug, default/net-debug-2]}
`)
}

// TestDctlTestBrokenExpectation: a wrong expectation fails the test (exit
// 1) with a diff of only the differing field, naming the step, the
// assertion and the object; the JUnit report has the failure.
func TestDctlTestBrokenExpectation(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"test", annotatorTest(t, "2")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("the correct expectation: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	junit := filepath.Join(t.TempDir(), "report.xml")
	code := Execute([]string{"test", annotatorTest(t, "3"), "--junit", junit}, nil, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	want := `    spec.steps[1].expect[0] (step "two containers") v1 Pod default/net-debug: differs
      metadata.annotations["dcontroller.io/container-num"]
        - expected: "3"
        + actual:   "2"
0 passed, 1 failed
`
	out := stdout.String()
	if !strings.HasPrefix(out, "FAIL annotator (") || !strings.HasSuffix(out, want) {
		t.Errorf("stdout:\n%s\nwant a FAIL line, then:\n%s", out, want)
	}
	if strings.Contains(out, "spec.containers") {
		t.Errorf("the diff shows fields that do not differ:\n%s", out)
	}
	report := readJUnit(t, junit)
	if report.Tests != 1 || report.Failures != 1 || len(report.Suites) != 1 || len(report.Suites[0].Cases) != 1 {
		t.Fatalf("JUnit report: %+v", report)
	}
	c := report.Suites[0].Cases[0]
	if c.Name != "annotator" || c.Failure == nil || !strings.Contains(c.Failure.Text, `- expected: "3"`) {
		t.Errorf("JUnit test case: %+v", c)
	}
}

// TestDctlTestRun: -run selects tests by name, as go test's -run does.
func TestDctlTestRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"test", "../../examples", "-run", "^webapp$"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "PASS webapp (") || lines[1] != "1 passed, 0 failed" {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

// TestDctlTestControllerErrors: an error the controllers report fails the
// step, unless the step lists it under errors.
func TestDctlTestControllerErrors(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: patch-missing}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          data: {pod: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`)
	test := func(errs string) string {
		return writeFile(t, "x_test.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Test
metadata: {name: patch-missing}
spec:
  operators: [`+op+`]
  steps:
    - apply:
        - object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}}
      exactly:
        - {apiVersion: v1, kind: ConfigMap, names: []}
`+errs)
	}
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"test", test("")}, nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "spec.steps[0].errors: the controllers' errors differ\n      + ") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := Execute([]string{"test", test("      errors: [\"not found\"]\n")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("with the error expected: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := Execute([]string{"test", test("      errors: [\"not found\", \"no such error\"]\n")}, nil, &stdout, &stderr); code != 1 {
		t.Fatalf("with an error expected that is not reported: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), `- "no such error" (expected, not reported)`) {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}

// TestDctlTestInvalidInput: invalid input exits 2 with a message naming the
// file and the path in it; the other tests still run.
func TestDctlTestInvalidInput(t *testing.T) {
	dir, err := filepath.Abs(annotator)
	if err != nil {
		t.Fatal(err)
	}
	head := "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  operators: [" + dir + "/operator.yaml]\n  steps:\n"
	pod := "{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}}"
	hook := writeFile(t, "hook.yaml", "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata: {name: c}\nspec: {}\n")
	badHook := writeFile(t, "badhook.yaml", "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: CompositeController\nmetadata: {name: c}\nspec: {parentResource: {apiVersion: v1, resource: nosuchthings}}\n")
	for _, tc := range []struct {
		name, file, want string
		args             []string
	}{
		{name: "unknown kind", file: "apiVersion: dcontroller.io/v1alpha1\nkind: Tset\nmetadata: {name: t}\n",
			want: `x_test.yaml: document 1: expected apiVersion dcontroller.io/v1alpha1 and kind Test, got apiVersion "dcontroller.io/v1alpha1" kind "Tset"`},
		{name: "unknown field", file: head + "    - aply: []\n", want: `x_test.yaml: document 1 (test "t"): unknown field "spec.steps[0].aply"`},
		{name: "file and object", file: head + "    - apply: [{file: a.yaml, object: " + pod + "}]\n",
			want: `x_test.yaml: document 1 (test "t"): spec.steps[0].apply[0]: set one of file and object, not both`},
		{name: "object without name", file: head + "    - {}\n    - expect: [{object: {apiVersion: v1, kind: Pod}}]\n",
			want: `spec.steps[1].expect[0].object: metadata.name: required`},
		{name: "delete without kind", file: head + "    - delete: [{apiVersion: v1, name: p}]\n", want: `spec.steps[0].delete[0].kind: required`},
		{name: "exactly without names", file: head + "    - exactly: [{apiVersion: v1, kind: Pod}]\n", want: `spec.steps[0].exactly[0].names: required`},
		{name: "no steps", file: "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec: {operators: [x.yaml]}\n", want: `spec.steps: required`},
		{name: "YAML syntax", file: head + "    - apply: [\n", want: `x_test.yaml: document 1: `},
		{name: "missing input file", file: head + "    - apply: [{file: nosuch.yaml}]\n",
			want: `x_test.yaml: test "t": spec.steps[0].apply[0].file: open `},
		{name: "missing operator file", file: "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  operators: [nosuch.yaml]\n  steps: [{}]\n",
			want: `x_test.yaml: test "t": spec.operators[0]: stat `},
		{name: "hook controller beside an Operator", file: "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  operators: [" + dir + "/operator.yaml, " + hook + "]\n  steps: [{}]\n",
			want: `spec.operators: ` + dir + `/operator.yaml: object 1 (Operator pod-container-num-annotator): with hook controllers (CompositeController, DecoratorController: metacontroller.k8s.io/v1alpha1), -f takes only them and CustomResourceDefinitions`},
		{name: "hook controller of an unknown resource", file: "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  operators: [" + badHook + "]\n  steps: [{}]\n",
			want: `x_test.yaml: test "t": controllers[0] (CompositeController c): `},
		{name: "deletion of a missing object", file: head + "    - delete: [{apiVersion: v1, kind: Pod, namespace: default, name: q}]\n",
			want: `x_test.yaml: test "t": spec.steps[0].delete[0]: deletes Pod default/q, which no earlier input creates`},
		{name: "invalid object name", file: head + "    - apply: [{object: {apiVersion: v1, kind: Pod, metadata: {name: Bad_Name, namespace: default}}}]\n",
			want: `x_test.yaml: test "t": spec.steps[0].apply[0].object: Pod "Bad_Name" is invalid: metadata.name`},
		{name: "assertion on a source kind", file: head + "    - absent: [{apiVersion: v1, kind: Service, name: s}]\n",
			want: `x_test.yaml: test "t": spec.steps[0].absent[0]: v1 Service is not a kind the operators write (their targets: v1 Pod)`},
		{name: "nonexistent directory", args: []string{"test", "/nonexistent/dir"}, want: "/nonexistent/dir: no such file"},
		{name: "no test file", args: []string{"test", "../../docs/images"}, want: "no test file"},
		{name: "bad -run", args: []string{"test", "-run", "(", "../../examples/webapp"}, want: "--run: error parsing regexp"},
		{name: "unknown flag", args: []string{"test", "--frobnicate"}, want: "unknown flag: --frobnicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"test", writeFile(t, "x_test.yaml", tc.file), "../../examples/webapp"}
			}
			var stdout, stderr bytes.Buffer
			code := Execute(args, nil, &stdout, &stderr)
			all := stdout.String() + stderr.String()
			if code != 2 {
				t.Errorf("exit %d, want 2\n%s", code, all)
			}
			if !strings.Contains(all, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, all)
			}
			if tc.args == nil && !strings.Contains(stdout.String(), "PASS webapp (") {
				t.Errorf("the valid test did not run:\n%s", all)
			}
			if strings.Contains(all, "goroutine ") {
				t.Errorf("stack trace:\n%s", all)
			}
		})
	}
}

// TestDctlTestStepsAccumulate: a step sees the inputs of the steps before
// it, and its targets are what dctl eval computes from all of them.
func TestDctlTestStepsAccumulate(t *testing.T) {
	dir, err := filepath.Abs(annotator)
	if err != nil {
		t.Fatal(err)
	}
	// The eval of the inputs, as one file, is the expectation of the last step.
	var evalOut, stderr bytes.Buffer
	if code := Execute([]string{"eval", "-f", dir + "/operator.yaml", "-i", dir + "/input.yaml"}, nil, &evalOut, &stderr); code != 0 {
		t.Fatal(stderr.String())
	}
	expected := writeFile(t, "expected.yaml", evalOut.String())
	file := writeFile(t, "x_test.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Test
metadata: {name: accumulate}
spec:
  operators: [`+dir+`/operator.yaml]
  steps:
    - apply: [{object: {apiVersion: v1, kind: Pod, metadata: {name: gone, namespace: default}, spec: {containers: []}}}]
      expect:
        - object: {apiVersion: v1, kind: Pod, metadata: {name: gone, namespace: default, annotations: {dcontroller.io/container-num: "0"}}}
    - apply: [{file: `+dir+`/input.yaml}]
      delete: [{apiVersion: v1, kind: Pod, namespace: default, name: gone}]
      expect: [{file: `+expected+`}]
      absent: [{apiVersion: v1, kind: Pod, namespace: default, name: gone}]
      exactly: [{apiVersion: v1, kind: Pod, names: [default/net-debug, default/net-debug-2, kube-system/etcd]}]
`)
	var stdout bytes.Buffer
	if code := Execute([]string{"test", file}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
}
