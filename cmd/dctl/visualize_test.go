package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVisualizeMermaidAndDot(t *testing.T) {
	for _, tc := range []struct{ format, golden string }{
		{"mermaid", "unready-pod-report.mmd"},
		{"dot", "unready-pod-report.dot"},
	} {
		var stdout, stderr bytes.Buffer
		code := Execute([]string{"visualize", "-f", "../../examples/unready-pod-report/operator.yaml", "--format", tc.format}, nil, &stdout, &stderr)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.format, code, stderr.String())
		}
		want, err := os.ReadFile(filepath.Join("../../pkg/visualize/testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		if stdout.String() != string(want) {
			t.Errorf("%s output differs from pkg/visualize/testdata/%s:\n%s", tc.format, tc.golden, stdout.String())
		}
	}
}

// TestREADMEPicture checks that the picture committed for the README is what
// `dctl visualize` draws today (make docs-picture regenerates it).
func TestREADMEPicture(t *testing.T) {
	out := filepath.Join(t.TempDir(), "pic.mmd")
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"visualize", "-f", "../../examples/unready-pod-report/operator.yaml", "--output", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("--output also wrote to stdout: %s", stdout.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```mermaid\n"+string(got)+"```\n") {
		t.Errorf("README.md does not hold the mermaid picture dctl visualize draws for examples/unready-pod-report; run make docs-picture and paste docs/images/unready-pod-report.mmd")
	}
	committed, err := os.ReadFile("../../docs/images/unready-pod-report.mmd")
	if err != nil || !bytes.Equal(committed, got) {
		t.Errorf("docs/images/unready-pod-report.mmd is stale (err %v); run make docs-picture", err)
	}
	// The SVG needs Graphviz to regenerate; check that it draws this
	// operator's boxes, and that README shows it.
	svg, err := os.ReadFile("../../docs/images/unready-pod-report.svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "operator unready&#45;pod&#45;report", "controller pod&#45;health", "controller namespace&#45;report", "PodHealth", "@gather", "ConfigMap", "Updater"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("docs/images/unready-pod-report.svg lacks %q; run make docs-picture", want)
		}
	}
	if !strings.Contains(string(readme), "](docs/images/unready-pod-report.svg)") {
		t.Errorf("README.md does not show docs/images/unready-pod-report.svg")
	}
}

func TestVisualizeSVGWithoutGraphviz(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Execute([]string{"visualize", "-f", annotator + "operator.yaml", "--format", "svg"}, nil, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), `Graphviz's "dot" command, which is not installed`) || !strings.Contains(stderr.String(), "apt-get install graphviz") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout: %s", stdout.String())
	}
}

func TestVisualizeSVGWithStandInDot(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = -Tsvg ] || exit 3\ngrep -q '^digraph dcontroller {' || exit 4\necho '<svg/>'\n"
	if err := os.WriteFile(filepath.Join(dir, "dot"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	out := filepath.Join(dir, "op.svg")
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"visualize", "-f", annotator + "operator.yaml", "--format", "svg", "-o", out}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if b, _ := os.ReadFile(out); string(b) != "<svg/>\n" {
		t.Errorf("svg file %q", b)
	}
}

func TestVisualizeErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"visualize", "-f", annotator + "operator.yaml", "--format", "png"}, `unknown format "png"`},
		{[]string{"visualize"}, `required flag(s) "filename" not set`},
		{[]string{"visualize", "-f", "/nonexistent.yaml"}, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Execute(tc.args, nil, &stdout, &stderr); code != 1 {
			t.Errorf("%v: exit %d", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr lacks %q: %s", tc.args, tc.want, stderr.String())
		}
	}
}
