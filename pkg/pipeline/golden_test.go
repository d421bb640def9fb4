package pipeline

import (
	"context"
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
	// Targets, if set, are the output names (Options.Outputs), and Outputs
	// the expected output collections by name, instead of Output.
	Targets []string                   `json:"targets"`
	Outputs map[string][]dbsp.Document `json:"outputs"`
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
			p, err := Compile(tc.Pipeline, tc.Sources, Options{Path: goldenPath, Dialect: tc.Dialect, Outputs: tc.Targets})
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
			// wants are the expected collections by output name.
			wants := map[string]*dbsp.ZSet{}
			for _, name := range p.Outputs() {
				wants[name] = dbsp.FromDocuments(tc.Outputs[name]...)
			}
			if len(tc.Targets) == 0 {
				wants = map[string]*dbsp.ZSet{"": dbsp.FromDocuments(tc.Output...)}
			}
			for name := range tc.Outputs {
				if wants[name] == nil {
					t.Fatalf("outputs: %q is not a target", name)
				}
			}

			// Snapshot: the whole inputs at once.
			state := map[string]*dbsp.ZSet{}
			for kind, docs := range tc.Inputs {
				state[kind] = dbsp.FromDocuments(docs...)
			}
			got, err := p.EvaluateOutputs(state)
			checkErr("Evaluate", err)
			for name, want := range wants {
				if !got[name].Equal(want) {
					t.Fatalf("Evaluate %q:\n got %v\nwant %v", name, got[name], want)
				}
			}
			if len(wants) == 1 {
				one, err := p.Evaluate(state)
				checkErr("Evaluate", err)
				if !one.Equal(got[p.Outputs()[0]]) {
					t.Fatalf("Evaluate %v differs from EvaluateOutputs %v", one, got)
				}
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
			integrals := map[string]*dbsp.Integrate{}
			for name := range wants {
				integrals[name] = dbsp.NewIntegrate()
			}
			process := func(step map[string]*dbsp.ZSet) error {
				if len(wants) == 1 {
					// Process, the one-output call.
					d, err := p.Process(step)
					integrals[p.Outputs()[0]].Step(d)
					return err
				}
				ds, err := p.ProcessOutputs(context.Background(), step)
				for name, d := range ds {
					integrals[name].Step(d)
				}
				return err
			}
			var errs []error
			for _, step := range steps {
				if err := process(step); err != nil {
					errs = append(errs, err)
				}
			}
			if len(tc.Errors) == 0 && len(errs) > 0 {
				t.Fatalf("Process: unexpected errors: %v", errs)
			}
			if len(tc.Errors) > 0 && len(errs) == 0 {
				t.Fatalf("Process: no errors, want %q", tc.Errors)
			}
			for name, want := range wants {
				if !integrals[name].Value().Equal(want) {
					t.Fatalf("Process (integrated) %q:\n got %v\nwant %v", name, integrals[name].Value(), want)
				}
			}
			for _, step := range steps {
				for _, z := range step {
					z.AddScaled(z, -2) // negate in place
				}
				_ = process(step)
			}
			for name := range wants {
				if !integrals[name].Value().IsEmpty() {
					t.Fatalf("deleting every input left output %q %v", name, integrals[name].Value())
				}
			}
		})
	}
}
