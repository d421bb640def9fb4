package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

var dctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dcontroller-docs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dctlBin = filepath.Join(dir, "dctl")
	build := exec.Command("go", "build", "-o", dctlBin, "../cmd/dctl")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ../cmd/dctl: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// example is one ```yaml example block of a page, under its ### heading.
type example struct {
	file, heading string
	line          int
	spec          exampleSpec
}

type exampleSpec struct {
	// Expression examples.
	Subject    map[string]any `json:"subject,omitempty"`
	Expression any            `json:"expression,omitempty"`
	Result     any            `json:"result,omitempty"`
	// Pipeline examples.
	Sources  []string         `json:"sources,omitempty"`
	Pipeline any              `json:"pipeline,omitempty"`
	Input    []map[string]any `json:"input,omitempty"`
	Output   []map[string]any `json:"output,omitempty"`
	// Error is a substring of the error dctl eval reports.
	Error string `json:"error,omitempty"`

	has map[string]bool
}

var headingRE = regexp.MustCompile("^#{2,3} `?(@[A-Za-z]+)`?")

// parsePage returns the examples of a Markdown page and its default
// subject (the ```yaml subject block).
func parsePage(t *testing.T, file string) ([]example, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []example
	var subject map[string]any
	heading := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := headingRE.FindStringSubmatch(l); m != nil {
			heading = m[1]
			continue
		}
		if strings.HasPrefix(l, "#") {
			heading = ""
			continue
		}
		info := strings.TrimPrefix(l, "```")
		if info == l || (info != "yaml example" && info != "yaml subject") {
			continue
		}
		start := i + 1
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		text := strings.Join(body, "\n")
		if info == "yaml subject" {
			if err := yaml.Unmarshal([]byte(text), &subject); err != nil {
				t.Fatalf("%s:%d: subject: %v", file, start, err)
			}
			continue
		}
		var spec exampleSpec
		if err := yaml.UnmarshalStrict([]byte(text), &spec); err != nil {
			t.Fatalf("%s:%d: %v", file, start, err)
		}
		var keys map[string]any
		_ = yaml.Unmarshal([]byte(text), &keys)
		spec.has = map[string]bool{}
		for k := range keys {
			spec.has[k] = true
		}
		out = append(out, example{file: filepath.Base(file), heading: heading, line: start, spec: spec})
	}
	return out, subject
}

// dctlEval writes the operator and the inputs to files and runs dctl eval
// -o json on them; it returns the items and the stderr.
func dctlEval(t *testing.T, op map[string]any, inputs []map[string]any) ([]map[string]any, string, error) {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, docs ...map[string]any) string {
		var buf bytes.Buffer
		for _, d := range docs {
			b, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(b)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	opFile := write("operator.yaml", op)
	inFile := write("input.yaml", inputs...)
	cmd := exec.Command(dctlBin, "eval", "-f", opFile, "-i", inFile, "-o", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
			t.Fatalf("dctl eval output: %v\n%s", err, stdout.String())
		}
	}
	return list.Items, stderr.String(), runErr
}

// normalize turns a value into its JSON form (numbers as float64), so that
// documented YAML and dctl's output compare by value.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func show(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

func groupVersionOf(obj map[string]any) schema.GroupVersion {
	gv, _ := schema.ParseGroupVersion(fmt.Sprint(obj["apiVersion"]))
	return gv
}

// runExample runs one example through dctl eval and checks its result.
func runExample(t *testing.T, ex example, subject map[string]any) {
	s := ex.spec
	var op map[string]any
	var inputs []map[string]any
	if s.has["pipeline"] {
		kinds := s.Sources
		groups := map[string]string{}
		for _, in := range s.Input {
			k := fmt.Sprint(in["kind"])
			if _, ok := groups[k]; !ok {
				groups[k] = groupVersionOf(in).Group
				if len(s.Sources) == 0 {
					kinds = append(kinds, k)
				}
			}
		}
		var sources []any
		for _, k := range kinds {
			g, ok := groups[k]
			if !ok {
				t.Fatalf("source %s has no input object to take its apiVersion from", k)
			}
			sources = append(sources, map[string]any{"apiGroup": g, "kind": k})
		}
		op = operatorWith(sources, s.Pipeline)
		inputs = s.Input
	} else {
		if !s.has["expression"] {
			t.Fatalf("an example needs expression or pipeline")
		}
		subj := subject
		if s.Subject != nil {
			subj = s.Subject
		}
		if subj == nil {
			t.Fatalf("no subject: add a ```yaml subject block to the page or subject: to the example")
		}
		gv := groupVersionOf(subj)
		op = operatorWith([]any{map[string]any{"apiGroup": gv.Group, "kind": subj["kind"]}}, map[string]any{
			"@project": map[string]any{
				"metadata": map[string]any{"name": "result", "namespace": "docs"},
				"result":   s.Expression,
			},
		})
		inputs = []map[string]any{subj}
	}
	items, stderr, err := dctlEval(t, op, inputs)
	if s.Error != "" {
		if err == nil || !strings.Contains(stderr, s.Error) {
			t.Fatalf("want an error containing %q, got %v, stderr:\n%s", s.Error, err, stderr)
		}
		return
	}
	if err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr)
	}
	if s.has["pipeline"] {
		got := make([]any, len(items))
		for i, it := range items {
			delete(it, "apiVersion")
			delete(it, "kind")
			got[i] = it
		}
		want := make([]any, len(s.Output))
		for i, o := range s.Output {
			want[i] = o
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Errorf("output differs\n--- dctl eval\n%s--- documented\n%s", show(got), show(want))
		}
		return
	}
	if len(items) != 1 {
		t.Fatalf("dctl eval returned %d objects, want 1:\n%s", len(items), show(items))
	}
	if got := items[0]["result"]; !reflect.DeepEqual(normalize(got), normalize(s.Result)) {
		t.Errorf("result differs\n--- dctl eval\n%s--- documented\n%s", show(got), show(s.Result))
	}
}

func operatorWith(sources []any, pipeline any) map[string]any {
	return map[string]any{
		"apiVersion": "dcontroller.io/v1alpha1",
		"kind":       "Operator",
		"metadata":   map[string]any{"name": "docs"},
		"spec": map[string]any{"controllers": []any{map[string]any{
			"name":     "example",
			"sources":  sources,
			"pipeline": pipeline,
			"target":   map[string]any{"kind": "Output"},
		}}},
	}
}

// usedOperators returns the operators an expression calls.
func usedOperators(t *testing.T, e any) map[string]bool {
	t.Helper()
	parsed, err := expression.Parse(e, "example")
	if err != nil {
		t.Fatalf("parsing the example: %v", err)
	}
	out := map[string]bool{}
	expression.Walk(parsed, func(x expression.Expression) bool {
		if op, _, ok := expression.Operator(x); ok {
			out[op] = true
		}
		return true
	})
	return out
}

// TestExpressionReference runs every example of expressions.md and checks
// that every operator of the language has one under its heading.
func TestExpressionReference(t *testing.T) {
	examples, subject := parsePage(t, "reference/expressions.md")
	covered := map[string]int{}
	for _, ex := range examples {
		t.Run(fmt.Sprintf("%s:%d", ex.heading, ex.line), func(t *testing.T) {
			if ex.spec.has["expression"] && ex.heading != "" {
				if !usedOperators(t, ex.spec.Expression)[ex.heading] {
					t.Errorf("the example under %s does not use %s", ex.heading, ex.heading)
				} else {
					covered[ex.heading]++
				}
			}
			runExample(t, ex, subject)
		})
	}
	for _, op := range expression.Operators() {
		if covered[op] == 0 {
			t.Errorf("operator %s has no example in docs/reference/expressions.md (a \"### %s\" heading followed by a ```yaml example block using it)", op, op)
		}
	}
	for h := range covered {
		if !contains(expression.Operators(), h) {
			t.Errorf("expressions.md documents %s, which is not an operator", h)
		}
	}
}

// pipelineStages reads the stage names from pkg/pipeline's constants
// (opJoin = "@join", ...), so that a new stage fails this test until it is
// documented.
func pipelineStages(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../pkg/pipeline/pipeline.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "op") {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "@") {
				out = append(out, s)
			}
		}
		return true
	})
	sort.Strings(out)
	if len(out) < 7 {
		t.Fatalf("found only %v in pkg/pipeline/pipeline.go", out)
	}
	return out
}

// TestPipelineReference runs every example of pipeline.md and checks that
// every stage (aliases included) has one under its heading.
func TestPipelineReference(t *testing.T) {
	examples, _ := parsePage(t, "reference/pipeline.md")
	covered := map[string]int{}
	for _, ex := range examples {
		t.Run(fmt.Sprintf("%s:%d", ex.heading, ex.line), func(t *testing.T) {
			if !ex.spec.has["pipeline"] {
				t.Fatalf("a pipeline example needs pipeline, input and output")
			}
			if ex.heading != "" && stageNames(ex.spec.Pipeline)[ex.heading] {
				covered[ex.heading]++
			} else if ex.heading != "" {
				t.Errorf("the example under %s does not use it", ex.heading)
			}
			runExample(t, ex, nil)
		})
	}
	for _, st := range pipelineStages(t) {
		if covered[st] == 0 {
			t.Errorf("stage %s has no example in docs/reference/pipeline.md (a \"### %s\" heading followed by a ```yaml example block using it)", st, st)
		}
	}
}

// TestGettingStartedOperator checks that the operator the getting-started
// guide applies is the example that the tests run.
func TestGettingStartedOperator(t *testing.T) {
	guide, err := os.ReadFile("getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/pod-container-num-annotator/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, l := range strings.Split(string(example), "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	if !strings.Contains(string(guide), strings.Join(body, "\n")) {
		t.Errorf("docs/getting-started.md does not show examples/pod-container-num-annotator/operator.yaml (without its comments)")
	}
}

// TestLinks checks that the relative links of every page point to files.
func TestLinks(t *testing.T) {
	pages, _ := filepath.Glob("*.md")
	more, _ := filepath.Glob("reference/*.md")
	pages = append(pages, more...)
	pages = append(pages, "../README.md")
	linkRE := regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`)
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := filepath.Join(filepath.Dir(p), m[1])
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", p, m[1])
			}
		}
	}
}

// stageNames returns the stages of a pipeline spec, in every branch of
// the branch form.
func stageNames(p any) map[string]bool {
	out := map[string]bool{}
	stages, ok := p.([]any)
	if !ok {
		stages = []any{p}
	}
	for _, st := range stages {
		switch st := st.(type) {
		case map[string]any:
			for k := range st {
				out[k] = true
			}
		case []any: // a branch
			for k := range stageNames(st) {
				out[k] = true
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPictures checks that the Mermaid pictures of the pages are what
// `dctl visualize` draws today.
func TestPictures(t *testing.T) {
	for page, op := range map[string]string{
		"getting-started.md": "../examples/pod-container-num-annotator/operator.yaml",
		"concepts.md":        "../examples/service-endpoints/operator.yaml",
	} {
		out, err := exec.Command(dctlBin, "visualize", "-f", op).Output()
		if err != nil {
			t.Fatalf("dctl visualize -f %s: %v", op, err)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "```mermaid\n"+string(out)+"```\n") {
			t.Errorf("%s does not show what `dctl visualize -f %s` draws:\n%s", page, op, out)
		}
	}
}

// TestRBACPage checks that the dctl rbac output shown in rbac.md is what
// dctl prints.
func TestRBACPage(t *testing.T) {
	out, err := exec.Command(dctlBin, "rbac", "-f", "../examples/pod-container-num-annotator/operator.yaml", "--offline").Output()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("rbac.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "```console\n$ dctl rbac -f examples/pod-container-num-annotator/operator.yaml --offline\n" + string(out) + "```\n"
	if !strings.Contains(string(b), want) {
		t.Errorf("rbac.md does not show what dctl rbac prints:\n%s", out)
	}
}
