package dtest

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzTestFile feeds arbitrary bytes to the test-file parser: it returns
// tests or an error, never panics, and a test it returns is one whose every
// inline object decodes (what the runner relies on). Seeds: the examples'
// test files. Run: go test ./pkg/dtest -run '^$' -fuzz FuzzTestFile -fuzztime 2m
func FuzzTestFile(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/*/*_test.yaml")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: dcontroller.io/v1alpha1\nkind: Test\nmetadata: {name: t}\nspec: {operators: [a], steps: [{exactly: [{apiVersion: v1, kind: Pod, names: []}]}]}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tests, err := Parse(data, "fuzz_test.yaml")
		if err != nil {
			return
		}
		if len(tests) == 0 {
			t.Fatal("no error and no test")
		}
		for _, tt := range tests {
			if tt.Metadata.Name == "" || len(tt.Spec.Steps) == 0 || len(tt.Spec.Operators) == 0 {
				t.Fatalf("an incomplete test passed: %+v", tt)
			}
			for _, st := range tt.Spec.Steps {
				for _, o := range append(append([]Objects{}, st.Apply...), st.Expect...) {
					if o.File == "" {
						if _, err := o.Decode(); err != nil {
							t.Fatalf("an inline object that does not decode passed: %v", err)
						}
					}
				}
			}
		}
	})
}
