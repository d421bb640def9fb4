package dtest

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests, err := Parse([]byte(`
apiVersion: dcontroller.io/v1alpha1
kind: Test
metadata: {name: one}
spec:
  operators: [op.yaml]
  steps:
    - name: s
      apply: [{file: in.yaml}, {object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}, spec: {count: 1}}}]
      delete: [{apiVersion: v1, kind: Pod, namespace: ns, name: q}]
      expect: [{object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}}}]
      absent: [{apiVersion: v1, kind: Pod, name: q, namespace: ns}]
      exactly: [{apiVersion: v1, kind: Pod, namespace: ns, names: [ns/p]}]
      errors: [boom]
---
apiVersion: dcontroller.io/v1alpha1
kind: Test
metadata: {name: two}
spec: {operators: [op.yaml], steps: [{}]}
`), "x_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != 2 || tests[0].Metadata.Name != "one" || tests[1].Index != 2 || tests[1].File != "x_test.yaml" {
		t.Fatalf("got %+v", tests)
	}
	obj, err := tests[0].Spec.Steps[0].Apply[1].Decode()
	if err != nil {
		t.Fatal(err)
	}
	// Integers as dctl eval reads them.
	if n := obj["spec"].(map[string]any)["count"]; !reflect.DeepEqual(n, int64(1)) {
		t.Errorf("spec.count = %#v, want int64(1)", n)
	}
}

func TestParseErrors(t *testing.T) {
	head := "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec:\n  operators: [op.yaml]\n  steps:\n"
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "", "x_test.yaml: no Test found"},
		{"not a Test", "apiVersion: v1\nkind: Pod\n", `x_test.yaml: document 1: expected apiVersion dcontroller.io/v1alpha1 and kind Test, got apiVersion "v1" kind "Pod"`},
		{"a scalar document", "3\n", "x_test.yaml: document 1: not an object"},
		{"duplicate key", head + "    - {name: a, name: b}\n", `x_test.yaml: document 1: `},
		{"no name", "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nspec: {}\n", "x_test.yaml: document 1: metadata.name: required"},
		{"no operators", "apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec: {steps: [{}]}\n", `x_test.yaml: document 1 (test "t"): spec.operators: required`},
		{"unknown field", head + "    - {expected: []}\n", `unknown field "spec.steps[0].expected"`},
		{"wrong type", head + "    - {apply: {file: x}}\n", `spec.steps`},
		{"neither file nor object", head + "    - {apply: [{}]}\n", "spec.steps[0].apply[0]: set one of file and object"},
		{"object null", head + "    - {expect: [{object: null}]}\n", "spec.steps[0].expect[0]: set one of file and object"},
		{"object without kind", head + "    - {apply: [{object: {apiVersion: v1, metadata: {name: p}}}]}\n", "spec.steps[0].apply[0].object: kind: required"},
		{"namespace not a string", head + "    - {apply: [{object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: 3}}}]}\n", "spec.steps[0].apply[0].object: metadata.namespace: want a string, got 3"},
		{"absent without name", head + "    - {absent: [{apiVersion: v1, kind: Pod}]}\n", "spec.steps[0].absent[0].name: required"},
		{"exactly name twice", head + "    - {exactly: [{apiVersion: v1, kind: Pod, names: [a, a]}]}\n", `spec.steps[0].exactly[0].names[1]: "a" is given twice`},
		{"exactly name form", head + "    - {exactly: [{apiVersion: v1, kind: Pod, names: [a/b/c]}]}\n", `spec.steps[0].exactly[0].names[0]: "a/b/c": want "namespace/name" or "name"`},
		{"exactly other namespace", head + "    - {exactly: [{apiVersion: v1, kind: Pod, namespace: ns, names: [m/a]}]}\n", `"m/a" is not in namespace "ns"`},
		{"empty error", head + "    - {errors: [\"\"]}\n", "spec.steps[0].errors[0]: empty"},
		{"second document", head + "    - {}\n---\n" + head + "    - {delete: [{kind: Pod, name: p}]}\n", `x_test.yaml: document 2 (test "t"): spec.steps[0].delete[0].apiVersion: required`},
		{"too large", strings.Repeat("#", MaxFileBytes+1), "more than the 4194304 a test file may have"},
		{"too many documents", strings.Repeat("apiVersion: x\n---\n", MaxDocuments+1), "more than 1000 documents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), "x_test.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a_test.yaml", "b_test.yml", "input.yaml", "sub/c_test.yaml", "sub/tests/d.yaml",
		"sub/tests/e.yml", "sub/tests/fixtures/f.yaml", "sub/tests/notes.md", ".hidden/g_test.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Discover([]string{dir, filepath.Join(dir, "input.yaml"), filepath.Join(dir, "a_test.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, r)
	}
	want := []string{"a_test.yaml", "b_test.yml", "input.yaml", "sub/c_test.yaml", "sub/tests/d.yaml", "sub/tests/e.yml"}
	if !reflect.DeepEqual(rel, want) {
		t.Errorf("got %q, want %q", rel, want)
	}
	if _, err := Discover([]string{filepath.Join(dir, "nosuch")}); err == nil {
		t.Error("a missing path: no error")
	}
}
