package visualize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func build(t *testing.T, file string) *Graph {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := operator.DecodeObjects(f)
	if err != nil {
		t.Fatal(err)
	}
	// A file may hold ResourceGraphDefinitions: each is drawn as the
	// Operator it compiles to (rgd.Compile), as dctl visualize draws it.
	var ops []*opv1a1.Operator
	for _, obj := range objs {
		b, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetKind() == "ResourceGraphDefinition" {
			r := &krov1a1.ResourceGraphDefinition{}
			if err := json.Unmarshal(b, r); err != nil {
				t.Fatal(err)
			}
			c, err := rgd.Compile(r)
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, c.Operator)
			continue
		}
		decoded, err := operator.DecodeOperators(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, decoded...)
	}
	g, err := Build(ops)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/visualize -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestGolden renders every example operator in both formats.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/operator.yaml")
	if len(files) < 3 {
		t.Fatalf("found %d examples", len(files))
	}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		t.Run(name, func(t *testing.T) {
			g := build(t, f)
			var m, d bytes.Buffer
			if err := g.Mermaid(&m); err != nil {
				t.Fatal(err)
			}
			if err := g.Dot(&d); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".mmd", m.Bytes())
			golden(t, name+".dot", d.Bytes())
		})
	}
}

// TestChainThroughView checks the structure of a two-controller chain: the
// view is one node, written by the first controller and read by the second.
func TestChainThroughView(t *testing.T) {
	g := build(t, "../../examples/unready-pod-report/operator.yaml")
	view := "view_unready_pod_report_PodHealth"
	var in, out []Edge
	for _, e := range g.Edges {
		if e.To == view {
			in = append(in, e)
		}
		if e.From == view {
			out = append(out, e)
		}
	}
	if len(in) != 1 || in[0].From != "op0_c0_s0" || in[0].Label != "Updater" {
		t.Errorf("edges into the view: %+v", in)
	}
	if len(out) != 1 || out[0].To != "op0_c1_s0" {
		t.Errorf("edges out of the view: %+v", out)
	}
	if got := len(g.Operators[0].Controllers[1].Stages); got != 4 {
		t.Errorf("namespace-report has %d stages, want 4", got)
	}
}

func TestEscapingAndSourceTypes(t *testing.T) {
	ops, err := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: quote}
spec:
  controllers:
    - name: c
      sources:
        - {apiGroup: "", kind: ConfigMap, namespace: ns1, labelSelector: {matchLabels: {a: b}}}
        - {apiGroup: "", kind: Node, type: Periodic}
      pipeline:
        - "@join": {"@eq": ["$.ConfigMap.data.x", 'say "hi" <b>']}
      target: {apiGroup: apps, version: v1, kind: Deployment, type: Applier}
`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(ops)
	if err != nil {
		t.Fatal(err)
	}
	var m, d bytes.Buffer
	_ = g.Mermaid(&m)
	_ = g.Dot(&d)
	for _, want := range []string{
		`res_core_ConfigMap_ns_ns1(["ConfigMap<br/>core<br/>namespace ns1"])`,
		`res_core_ConfigMap_ns_ns1 -- "selected" --> op0_c0_s0`,
		`res_core_Node -- "Periodic" --> op0_c0_s0`,
		`res_apps_Deployment(["Deployment<br/>apps/v1"])`,
		`op0_c0_s0 -- "Applier" --> res_apps_Deployment`,
		`say #quot;hi#quot; #lt;b#gt;`,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m.String())
		}
	}
	if !strings.Contains(d.String(), `say \"hi\" <b>`) {
		t.Errorf("dot does not escape quotes:\n%s", d.String())
	}
}

func TestBuildError(t *testing.T) {
	ops, err := operator.DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: bad}
spec:
  controllers:
    - {name: a, sources: [{kind: V}], pipeline: {"@select": true}, target: {kind: W}}
    - {name: b, sources: [{kind: V}], pipeline: [{"@select": true, "@project": {}}], target: {kind: W}}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(ops)
	if err == nil || !strings.Contains(err.Error(), `operator "bad": spec.controllers[1].pipeline[0]: a pipeline stage must be a map with a single "@stage" key`) {
		t.Fatalf("error: %v", err)
	}
}

// TestSVG runs a stand-in for Graphviz's dot that records its arguments and
// input, so the test needs no Graphviz, and checks the error without dot.
func TestSVG(t *testing.T) {
	g := build(t, "../../examples/pod-container-num-annotator/operator.yaml")
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-dot")
	script := "#!/bin/sh\necho \"$@\" > " + dir + "/args\ncat > " + dir + "/input\necho '<svg>fake</svg>'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(old string) { DotCommand = old }(DotCommand)
	DotCommand = fake
	svg, err := g.SVG(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(svg) != "<svg>fake</svg>\n" {
		t.Errorf("svg %q", svg)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	input, _ := os.ReadFile(filepath.Join(dir, "input"))
	var dot bytes.Buffer
	_ = g.Dot(&dot)
	if strings.TrimSpace(string(args)) != "-Tsvg" || !bytes.Equal(input, dot.Bytes()) {
		t.Errorf("dot ran with args %q and input\n%s", args, input)
	}

	DotCommand = filepath.Join(dir, "no-such-dot")
	if _, err := g.SVG(context.Background()); !errors.Is(err, ErrNoGraphviz) || !strings.Contains(err.Error(), "apt-get install graphviz") {
		t.Errorf("without dot: %v", err)
	}
}

// TestBranches draws a pipeline in branch form: each branch a chain from
// its inputs to its output, the stream that two branches write one node
// read by the third, the last branch's output to the target.
func TestBranches(t *testing.T) {
	g := build(t, "testdata/branches-operator.yaml")
	var m, d bytes.Buffer
	if err := g.Mermaid(&m); err != nil {
		t.Fatal(err)
	}
	if err := g.Dot(&d); err != nil {
		t.Fatal(err)
	}
	golden(t, "branches.mmd", m.Bytes())
	golden(t, "branches.dot", d.Bytes())
	want := []Edge{
		{From: "op0_c0_b0_s0", To: "op0_c0_st_running"},
		{From: "op0_c0_b1_s0", To: "op0_c0_st_running"},
		{From: "op0_c0_st_running", To: "op0_c0_b2_s0"},
		{From: "res_core_Pod", To: "op0_c0_b0_s0"},
		{From: "res_core_Pod", To: "op0_c0_b1_s0"},
		{From: "res_core_Service", To: "op0_c0_b2_s0"},
		{From: "op0_c0_b2_s1", To: "view_branches_ServicePods", Label: "Updater"},
	}
	for _, e := range want {
		if !slices.Contains(g.Edges, e) {
			t.Errorf("no edge %+v in %+v", e, g.Edges)
		}
	}
	if len(g.Edges) != len(want)+1 { // and b2_s0 -> b2_s1
		t.Errorf("%d edges, want %d: %+v", len(g.Edges), len(want)+1, g.Edges)
	}
}
