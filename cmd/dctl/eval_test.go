package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestExamples runs every example under examples/ through `dctl eval` and
// compares the result with the example's expected.yaml.
func TestExamples(t *testing.T) {
	dirs, err := filepath.Glob("../../examples/*/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("expected at least 3 examples, found %d", len(dirs))
	}
	for _, op := range dirs {
		dir := filepath.Dir(op)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Execute([]string{"eval", "-f", op, "-i", filepath.Join(dir, "input.yaml")}, nil, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if got := stdout.String(); got != string(want) {
				t.Errorf("output differs from expected.yaml\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const annotator = "../../examples/pod-container-num-annotator/"

func TestEvalJSONOutputIsList(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "-f", annotator + "operator.yaml", "-i", annotator + "input.yaml", "-o", "json"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var list struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := yaml.Unmarshal(stdout.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("got apiVersion %q kind %q with %d items", list.APIVersion, list.Kind, len(list.Items))
	}
}

func TestEvalTrace(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "--trace", "-f", annotator + "operator.yaml", "-i", annotator + "input.yaml"}, nil, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	trace := stderr.String()
	for _, want := range []string{
		"pod-container-num-annotator/pod-container-num-annotator dialect deltacontroller\n",
		`pod-container-num-annotator/pod-container-num-annotator spec.controllers[0].pipeline["@project"] +1`,
		`"dcontroller.io/container-num":"3"`,
		`-1 {"metadata":{"annotations":{"dcontroller.io/container-num":"3"}`,
	} {
		if !strings.Contains(trace, want) {
			t.Errorf("trace lacks %q:\n%s", want, trace)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	badStage := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: bad}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        - "@select": true
        - "@frobnicate": {}
      target: {kind: X}
`)
	badExpr := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: bad}
spec:
  controllers:
    - name: ok
      sources: [{apiGroup: "", kind: Pod}]
      pipeline: {"@select": true}
      target: {kind: X}
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata:
            name: {"@nosuchop": 1}
      target: {kind: X}
`)
	typo := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: bad}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipline: {"@select": true}
      target: {kind: X}
`)
	input := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n")
	badInput := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n---\n"+
		"apiVersion: v1\nkind: Pod\nmetadata: {name: Bad_In, namespace: default}\n")
	deleteMissing := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n---\n"+
		"apiVersion: v1\nkind: Pod\nmetadata: {name: q, namespace: default, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n")
	deleteTwice := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n---\n"+
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n---\n"+
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, deletionTimestamp: \"2026-01-01T00:00:00Z\"}\n")
	badLimit := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: lim}
spec:
  limits: {maxDeltaEntries: -5}
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipeline: {"@select": true}
      target: {kind: X}
`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown stage", []string{"eval", "-f", badStage, "-i", input}, 1, `operator "bad": spec.controllers[0].pipeline[1]: unknown pipeline stage "@frobnicate"`},
		{"unknown expression operator", []string{"eval", "-f", badExpr, "-i", input}, 1, `spec.controllers[1].pipeline["@project"].metadata.name: unknown operator "@nosuchop"`},
		{"misspelt field", []string{"eval", "-f", typo}, 1, `unknown field "spec.controllers[0].pipline"`},
		{"missing operator file", []string{"eval", "-f", "/nonexistent.yaml"}, 1, "no such file"},
		{"no -f", []string{"eval"}, 1, `required flag(s) "filename" not set`},
		{"bad output format", []string{"eval", "-f", annotator + "operator.yaml", "-o", "xml"}, 1, `unknown format "xml"`},
		{"invalid input name", []string{"eval", "-f", annotator + "operator.yaml", "-i", badInput}, 1, `in.yaml: object 2: Pod "Bad_In" is invalid: metadata.name: Invalid value: "Bad_In"`},
		{"deletion of a missing input", []string{"eval", "-f", annotator + "operator.yaml", "-i", deleteMissing}, 1, `in.yaml: object 2: deletes Pod default/q, which no earlier input creates`},
		{"deletion of a missing input, traced", []string{"eval", "--trace", "-f", annotator + "operator.yaml", "-i", deleteMissing}, 1, `in.yaml: object 2: deletes Pod default/q`},
		{"second deletion", []string{"eval", "-f", annotator + "operator.yaml", "-i", deleteTwice}, 1, `in.yaml: object 3: deletes Pod default/p, which no earlier input creates (or an earlier one deleted already)`},
		{"limit below 1 in the spec", []string{"eval", "-f", badLimit}, 1, `spec.limits.maxDeltaEntries: Invalid value: -5: should be greater than or equal to 1`},
		{"zero bound flag", []string{"eval", "-f", annotator + "operator.yaml", "--max-delta-entries", "0"}, 1, `want a positive number, or a negative one for no bound, got 0`},
		{"zero object bytes flag", []string{"eval", "-f", annotator + "operator.yaml", "--max-object-bytes=0"}, 1, `got 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Execute(tc.args, nil, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("stack trace on stderr:\n%s", stderr.String())
			}
		})
	}
}

func TestEvalRuntimeErrorExitsTwo(t *testing.T) {
	// A Patcher whose target does not exist is reported, not created.
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
	input := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n")
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "-f", op, "-i", input}, nil, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "ConfigMap default/p: not found: a Patcher target does not create objects") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("a Patcher created an object:\n%s", stdout.String())
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"eval", "--help"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout.String(), "--trace") {
		t.Errorf("help lacks --trace:\n%s", stdout.String())
	}
}

// An output of a namespaced native kind without metadata.namespace is
// refused with the API server's answer, which the manager reports in the
// controller's status (an Updater creates it: BadRequest; an Applier
// applies it at the kind's cluster-wide URL: NotFound), and it is not in
// the output (exit 2). Cluster-scoped kinds and views (the manager keeps a
// view object without a namespace) are written.
func TestEvalNamespacedOutputWithoutNamespace(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: scope}
spec:
  controllers:
    - name: updater
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata: {name: {"@concat": ["$.metadata.name", "-copy"]}}
          data: {pod: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap}
    - name: applier
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata: {name: {"@concat": ["$.metadata.name", "-applied"]}}
          data: {pod: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap, type: Applier}
    - name: cluster
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata: {name: {"@concat": ["ns-", "$.metadata.name"]}}
      target: {apiGroup: "", kind: Namespace}
    - name: view
      sources: [{apiGroup: "", kind: Pod}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name"}
      target: {kind: PodName}
`)
	input := writeFile(t, "in.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n")
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"eval", "-f", op, "-i", input}, nil, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
	}
	for _, want := range []string{
		`spec.controllers[0].target: ConfigMap p-copy: an empty namespace may not be set during creation`,
		`spec.controllers[1].target: ConfigMap p-applied: the server could not find the requested resource`,
		"2 error(s) while running the controllers",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	out := stdout.String()
	if strings.Contains(out, "p-copy") || strings.Contains(out, "p-applied") {
		t.Errorf("an object without its namespace is in the output:\n%s", out)
	}
	for _, want := range []string{"kind: Namespace\n", "  name: ns-p\n", "kind: PodName\nmetadata:\n  name: p\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
