package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

// goldenCase is one testdata/*.yaml file.
type goldenCase struct {
	// Sources are the source kinds, in order (default: [Pod]).
	Sources []string `json:"sources"`
	// Pipeline is the pipeline spec, compiled at path spec.pipeline.
	Pipeline any `json:"pipeline"`
	// Inputs are the source collections, keyed by kind.
	Inputs map[string][]dbsp.Document `json:"inputs"`
	// Output is the expected output collection (in any order).
	Output []dbsp.Document `json:"output"`
	// CompileError, if set, is the expected compile error message.
	CompileError string `json:"compileError"`
	// Errors are substrings expected in the evaluation error.
	Errors []string `json:"errors"`
	// Dialect is the pipeline's dialect (see Options.Dialect).
	Dialect expression.Dialect `json:"dialect"`
}

const goldenPath = "spec.pipeline"

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tc goldenCase
			if err := yaml.UnmarshalStrict(data, &tc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(tc.Sources) == 0 {
				tc.Sources = []string{"Pod"}
			}
			p, err := Compile(tc.Pipeline, tc.Sources, Options{Path: goldenPath, Dialect: tc.Dialect})
			if tc.CompileError != "" {
				if err == nil || err.Error() != tc.CompileError {
					t.Fatalf("compile error:\n got %v\nwant %s", err, tc.CompileError)
				}
				return
			}
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			checkErr := func(what string, err error) {
				t.Helper()
				if len(tc.Errors) == 0 && err != nil {
					t.Fatalf("%s: unexpected error: %v", what, err)
				}
				for _, want := range tc.Errors {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("%s: error %v does not contain %q", what, err, want)
					}
				}
			}
			want := dbsp.FromDocuments(tc.Output...)

			// Snapshot: the whole inputs at once.
			state := map[string]*dbsp.ZSet{}
			for kind, docs := range tc.Inputs {
				state[kind] = dbsp.FromDocuments(docs...)
			}
			got, err := p.Evaluate(state)
			checkErr("Evaluate", err)
			if !got.Equal(want) {
				t.Fatalf("Evaluate:\n got %v\nwant %v", got, want)
			}

			// Incremental: one document per step, the sources interleaved,
			// then every document deleted again.
			var steps []map[string]*dbsp.ZSet
			for i := 0; ; i++ {
				more := false
				for _, kind := range tc.Sources {
					if docs := tc.Inputs[kind]; i < len(docs) {
						steps = append(steps, map[string]*dbsp.ZSet{kind: dbsp.FromDocuments(docs[i])})
						more = true
					}
				}
				if !more {
					break
				}
			}
			integral := dbsp.NewIntegrate()
			var errs []error
			for _, step := range steps {
				d, err := p.Process(step)
				if err != nil {
					errs = append(errs, err)
				}
				integral.Step(d)
			}
			if len(tc.Errors) == 0 && len(errs) > 0 {
				t.Fatalf("Process: unexpected errors: %v", errs)
			}
			if len(tc.Errors) > 0 && len(errs) == 0 {
				t.Fatalf("Process: no errors, want %q", tc.Errors)
			}
			if !integral.Value().Equal(want) {
				t.Fatalf("Process (integrated):\n got %v\nwant %v", integral.Value(), want)
			}
			for _, step := range steps {
				for _, z := range step {
					z.AddScaled(z, -2) // negate in place
				}
				d, _ := p.Process(step)
				integral.Step(d)
			}
			if !integral.Value().IsEmpty() {
				t.Fatalf("deleting every input left output %v", integral.Value())
			}
		})
	}
}
