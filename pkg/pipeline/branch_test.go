package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

func TestBranchErrors(t *testing.T) {
	podSvc := []string{"Pod", "Service"}
	tests := []struct {
		name    string
		spec    string
		sources []string
		outputs []string
		want    string
	}{
		{"branches mixed with a stage", `[[{"@inputs": ["Pod"]}, {"@output": "Out"}], {"@select": true}]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[1]: a pipeline in branch form is a list of branches, each a list of stages [{"@inputs": [...]}, ..., {"@output": name}]; this element is a map with 1 keys, not a branch`},
		{"empty branch", `[[]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0]: an empty branch`},
		{"no inputs", `[[{"@select": true}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]: a branch must start with {"@inputs": [name, ...]}, got "@select"`},
		{"inputs not first", `[[{"@inputs": ["Pod"]}, {"@select": true}, {"@inputs": ["Pod"]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][2]: @inputs must be the first stage of a branch`},
		{"no output", `[[{"@inputs": ["Pod"]}, {"@select": true}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]: a branch must end with {"@output": name}, got "@select"`},
		{"output not last", `[[{"@inputs": ["Pod"]}, {"@output": "Out"}, {"@select": true}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]: @output must be the last stage of a branch`},
		{"output not last in a plain list", `[{"@select": true}, {"@output": "Out"}, {"@select": true}]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[1]: @output must be the last stage of a branch`},
		{"inputs not a list", `[[{"@inputs": "Pod"}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"]: @inputs takes a non-empty list of names`},
		{"inputs empty", `[[{"@inputs": []}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"]: @inputs takes a non-empty list of names`},
		{"input not a name", `[[{"@inputs": ["Pod", 1]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"][1]: an input is a non-empty name, got a number`},
		{"input empty", `[[{"@inputs": ["Pod", ""]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"][1]: an input is a non-empty name, got an empty string`},
		{"output empty", `[[{"@inputs": ["Pod"]}, {"@output": ""}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]["@output"]: @output takes a name (a target or a stream read by other branches), got an empty string`},
		{"duplicate input", `[[{"@inputs": ["Pod", "Pod"]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"][1]: duplicate input "Pod"`},
		{"output not a name", `[[{"@inputs": ["Pod"]}, {"@output": ["Out"]}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]["@output"]: @output takes a name (a target or a stream read by other branches), got a list`},
		{"unknown input", `[[{"@inputs": ["Pods"]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][0]["@inputs"][0]: "Pods" is neither a source kind (Pod) nor the @output of a branch`},
		{"output nobody reads", `[[{"@inputs": ["Pod"]}, {"@output": "Out"}], [{"@inputs": ["Pod"]}, {"@output": "Ot"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[1][1]["@output"]: "Ot" is neither a target (targets: Out) nor read by the @inputs of any branch`},
		{"output without targets", `[[{"@inputs": ["Pod"]}, {"@output": "Out"}]]`, nil, nil,
			`spec.controllers[0].pipeline[0][1]["@output"]: "Out" is neither a target (targets: none) nor read by the @inputs of any branch`},
		{"output shadows a source", `[[{"@inputs": ["Pod"]}, {"@output": "Pod"}], [{"@inputs": ["Pod"]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]["@output"]: "Pod" is a source kind and not a target (targets: Out)`},
		{"target not written", `[[{"@inputs": ["Pod"]}, {"@output": "A"}]]`, nil, []string{"A", "B"},
			`spec.controllers[0].pipeline: no branch writes the target "B": end a branch with {"@output": "B"}`},
		{"self cycle", `[[{"@inputs": ["Pod"]}, {"@output": "Out"}], [{"@inputs": ["s"]}, {"@output": "s"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[1]: the branches form a cycle, each reading the @output of the one before: [1] (@output "s") -> [1] (@output "s")`},
		{"cycle of three", `[[{"@inputs": ["c"]}, {"@output": "a"}], [{"@inputs": ["a"]}, {"@output": "b"}], [{"@inputs": ["b", "Pod"]}, {"@join": true}, {"@output": "c"}], [{"@inputs": ["c"]}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0]: the branches form a cycle, each reading the @output of the one before: [0] (@output "a") -> [1] (@output "b") -> [2] (@output "c") -> [0] (@output "a")`},
		{"several inputs without join", `[[{"@inputs": ["Pod", "Service"]}, {"@select": true}, {"@output": "Out"}]]`, podSvc, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]: a branch over several inputs (Pod, Service) must start with @join`},
		{"several inputs, no stage", `[[{"@inputs": ["Pod", "Service"]}, {"@output": "Out"}]]`, podSvc, []string{"Out"},
			`spec.controllers[0].pipeline[0]: a branch over several inputs (Pod, Service) must start with @join after @inputs`},
		{"join over one input", `[[{"@inputs": ["Pod"]}, {"@join": true}, {"@output": "Out"}]]`, podSvc, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]: @join needs at least two inputs, have 1`},
		{"join kinds are the input names", `[[{"@inputs": ["Pod"]}, {"@output": "p"}], [{"@inputs": ["p", "Service"]}, {"@join": [true, {"soft": ["Pod"]}]}, {"@output": "Out"}]]`, podSvc, []string{"Out"},
			`spec.controllers[0].pipeline[1][1]["@join"][1].soft[0]: "Pod" is not a source kind (p, Service)`},
		{"bad stage in a branch", `[[{"@inputs": ["Pod"]}, {"@frobnicate": 1}, {"@output": "Out"}]]`, nil, []string{"Out"},
			`spec.controllers[0].pipeline[0][1]: unknown pipeline stage "@frobnicate"`},
		{"plain pipeline, several targets", `[{"@select": true}]`, nil, []string{"A", "B"},
			`spec.controllers[0].pipeline: a pipeline writing several targets (A, B) must be in branch form`},
		{"plain list with @inputs, several targets", `[{"@inputs": ["Pod"]}, {"@select": true}]`, nil, []string{"A", "B"},
			`spec.controllers[0].pipeline: a pipeline writing several targets (A, B) must end each branch with {"@output": <target>}`},
		{"duplicate output names", `[]`, nil, []string{"A", "A"},
			`spec.controllers[0].pipeline: duplicate output name "A"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sources := tc.sources
			if sources == nil {
				sources = []string{"Pod"}
			}
			_, err := Compile(mustJSON(t, tc.spec), sources, Options{Path: path, Outputs: tc.outputs})
			if err == nil {
				t.Fatalf("no error, want %s", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error:\n got %s\nwant %s", err, tc.want)
			}
			var ee *expression.Error
			if !errors.As(err, &ee) || ee.Path == "" {
				t.Fatalf("error %v carries no spec path", err)
			}
		})
	}
}

func TestBranchAccepts(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		outputs []string
	}{
		// A target that a later branch also reads.
		{`[[{"@inputs": ["Pod"]}, {"@output": "A"}], [{"@inputs": ["A"]}, {"@distinct": null}, {"@output": "B"}]]`, []string{"A", "B"}},
		// A target named as a source kind (a Patcher of the source).
		{`[[{"@inputs": ["Pod"]}, {"@project": {"metadata": "$.metadata"}}, {"@output": "Pod"}]]`, []string{"Pod"}},
		// One branch written as a plain list, with or without @inputs.
		{`[{"@inputs": ["Pod"]}, {"@select": true}]`, []string{"Out"}},
		{`[{"@inputs": ["Pod"]}, {"@output": "Out"}]`, []string{"Out"}},
		{`[{"@output": "Out"}]`, []string{"Out"}},
	} {
		if _, err := Compile(mustJSON(t, tc.spec), []string{"Pod"}, Options{Path: path, Outputs: tc.outputs}); err != nil {
			t.Errorf("Compile(%s): %v", tc.spec, err)
		}
	}
}

// TestBranchOutputs: the one-output calls refuse several outputs; the
// outputs calls key every output, a plain pipeline's under its one name.
func TestBranchOutputs(t *testing.T) {
	pod := dbsp.FromDocuments(dbsp.Document{"metadata": map[string]any{"name": "a"}})
	two, err := Compile(mustJSON(t, `[
		[{"@inputs": ["Pod"]}, {"@output": "A"}],
		[{"@inputs": ["Pod"]}, {"@select": false}, {"@output": "B"}]]`), []string{"Pod"}, Options{Path: path, Outputs: []string{"A", "B"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `spec.controllers[0].pipeline: the pipeline has several outputs (A, B): use ProcessOutputs or EvaluateOutputs`
	if _, err := two.Process(map[string]*dbsp.ZSet{"Pod": pod}); err == nil || err.Error() != want {
		t.Fatalf("Process: %v, want %s", err, want)
	}
	if _, err := two.Evaluate(map[string]*dbsp.ZSet{"Pod": pod}); err == nil || err.Error() != want {
		t.Fatalf("Evaluate: %v, want %s", err, want)
	}
	outs, err := two.ProcessOutputs(context.Background(), map[string]*dbsp.ZSet{"Pod": pod})
	if err != nil || len(outs) != 2 || !outs["A"].Equal(pod) || outs["B"] == nil || !outs["B"].IsEmpty() {
		t.Fatalf("ProcessOutputs: %v, %v", outs, err)
	}
	// The identity branch's output is not the caller's input.
	outs["A"].Insert(dbsp.Document{"x": int64(1)}, 1)
	if pod.Len() != 1 {
		t.Fatal("the output shares the input Z-set")
	}

	plain, err := Compile(mustJSON(t, `{"@select": true}`), []string{"Pod"}, Options{Path: path, Outputs: []string{"Deployment"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Outputs(); !slices.Equal(got, []string{"Deployment"}) {
		t.Fatalf("Outputs() = %q", got)
	}
	outs, err = plain.EvaluateOutputs(map[string]*dbsp.ZSet{"Pod": pod})
	if err != nil || len(outs) != 1 || !outs["Deployment"].Equal(pod) {
		t.Fatalf("EvaluateOutputs: %v, %v", outs, err)
	}
	unnamed, err := Compile(mustJSON(t, `{"@select": true}`), []string{"Pod"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	outs, err = unnamed.ProcessOutputs(context.Background(), map[string]*dbsp.ZSet{"Pod": pod})
	if err != nil || len(outs) != 1 || !outs[""].Equal(pod) {
		t.Fatalf("ProcessOutputs without Outputs: %v, %v", outs, err)
	}
}

// TestBranchTrace: every stage is traced under its path in its branch, and
// every branch's output under its @output, in the order the branches run.
func TestBranchTrace(t *testing.T) {
	var got []string
	p, err := Compile(mustJSON(t, `[
		[{"@inputs": ["p", "Service"]}, {"@join": {"@eq": ["$.p.metadata.namespace", "$.Service.metadata.namespace"]}}, {"@output": "Out"}],
		[{"@inputs": ["Pod"]}, {"@select": true}, {"@project": {"metadata": "$.metadata"}}, {"@output": "p"}]]`),
		[]string{"Pod", "Service"}, Options{Path: path, Outputs: []string{"Out"}, Trace: func(stage string, _ *dbsp.ZSet) { got = append(got, stage) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Process(nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`spec.controllers[0].pipeline[1][1]["@select"]`,
		`spec.controllers[0].pipeline[1][2]["@project"]`,
		`spec.controllers[0].pipeline[1][3]["@output"]`,
		`spec.controllers[0].pipeline[0][1]["@join"]`,
		`spec.controllers[0].pipeline[0][2]["@output"]`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("trace\n got %q\nwant %q", got, want)
	}
}

// TestBranchLimit: a stage over MaxDeltaEntries in a later branch fails
// the call naming the stage, and the stateful stages of the branches that
// ran before it are stepped back.
func TestBranchLimit(t *testing.T) {
	p, err := Compile(mustJSON(t, `[
		[{"@inputs": ["ConfigMap"]}, {"@groupBy": ["$.data.k", "$.metadata.name"]}, {"@output": "Groups"}],
		[{"@inputs": ["ConfigMap"]}, {"@unwind": "$.data.l"}, {"@output": "Items"}]]`),
		[]string{"ConfigMap"}, Options{Path: path, Outputs: []string{"Groups", "Items"}, MaxDeltaEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	small := dbsp.FromDocuments(configMap("a", map[string]any{"k": "x", "l": []any{"1"}}))
	if _, err := p.ProcessOutputs(context.Background(), map[string]*dbsp.ZSet{"ConfigMap": small}); err != nil {
		t.Fatal(err)
	}
	big := dbsp.FromDocuments(configMap("b", map[string]any{"k": "x", "l": []any{"1", "2", "3", "4", "5"}}))
	outs, err := p.ProcessOutputs(context.Background(), map[string]*dbsp.ZSet{"ConfigMap": big})
	want := `spec.controllers[0].pipeline[1][1]["@unwind"]: the change would make this stage emit 5 entries, over the limit of 4`
	var le *LimitError
	if !errors.As(err, &le) || err.Error() != want || outs != nil {
		t.Fatalf("got %v and %v, want %s", outs, err, want)
	}
	// Deleting "a" retracts the group of "a" alone: "b" never got in.
	outs, err = p.ProcessOutputs(context.Background(), map[string]*dbsp.ZSet{"ConfigMap": small.Negate()})
	if err != nil {
		t.Fatal(err)
	}
	group := dbsp.Document{"key": "x", "values": []any{"a"}}
	if g := outs["Groups"]; g.Len() != 1 || g.Weight(group) != -1 {
		t.Fatalf("Groups changed by %v, want %v retracted", g, group)
	}
}

func TestBranchNamespaceLocal(t *testing.T) {
	tests := []struct {
		name, spec string
		outputs    []string
		wantPath   string
	}{
		{"stream keeps the namespace", `[
			[{"@inputs": ["Pod"]}, {"@project": {"metadata": "$.metadata"}}, {"@output": "s"}],
			[{"@inputs": ["s"]}, {"@groupBy": ["$.metadata.namespace", "$.metadata.name"]}, {"@output": "Out"}]]`, []string{"Out"}, ""},
		{"stream drops the namespace", `[
			[{"@inputs": ["Pod"]}, {"@project": {"name": "$.metadata.name"}}, {"@output": "s"}],
			[{"@inputs": ["s"]}, {"@distinct": null}, {"@output": "Out"}]]`, []string{"Out"}, `spec.controllers[0].pipeline[1][1]["@distinct"]`},
		{"one writer of a union drops it", `[
			[{"@inputs": ["Pod"]}, {"@project": {"metadata": "$.metadata"}}, {"@output": "s"}],
			[{"@inputs": ["Service"]}, {"@project": {"metadata": {"name": "$.metadata.name"}}}, {"@output": "s"}],
			[{"@inputs": ["s"]}, {"@distinct": null}, {"@output": "Out"}]]`, []string{"Out"}, `spec.controllers[0].pipeline[2][1]["@distinct"]`},
		{"join of a stream tied by namespace", `[
			[{"@inputs": ["Pod"]}, {"@project": {"metadata": "$.metadata"}}, {"@output": "s"}],
			[{"@inputs": ["s", "Service"]}, {"@join": {"@eq": ["$.s.metadata.namespace", "$.Service.metadata.namespace"]}},
				{"@groupBy": ["$.Service.metadata.namespace", "$.s"]}, {"@output": "Out"}]]`, []string{"Out"}, ""},
		{"join of a stream that lost its namespace", `[
			[{"@inputs": ["Pod"]}, {"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.spec.x"}}}, {"@output": "s"}],
			[{"@inputs": ["s", "Service"]}, {"@join": {"@eq": ["$.s.metadata.namespace", "$.Service.metadata.namespace"]}}, {"@output": "Out"}]]`, []string{"Out"},
			`spec.controllers[0].pipeline[1][1]["@join"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(mustJSON(t, tc.spec), []string{"Pod", "Service"}, Options{Path: path, Outputs: tc.outputs})
			if err != nil {
				t.Fatal(err)
			}
			err = p.NamespaceLocal()
			if tc.wantPath == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ee *expression.Error
			if !errors.As(err, &ee) || ee.Path != tc.wantPath {
				t.Fatalf("got %v, want an error at %s", err, tc.wantPath)
			}
		})
	}
}
