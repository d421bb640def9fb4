package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

const path = "spec.controllers[0].pipeline"

func mustJSON(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", s, err)
	}
	return v
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		sources []string
		want    string
	}{
		{"unknown stage", `[{"@select": true}, {"@project": {"a": 1}}, {"@frobnicate": {}}]`, nil,
			`spec.controllers[0].pipeline[2]: unknown pipeline stage "@frobnicate"`},
		{"unknown single stage", `{"@frobnicate": {}}`, nil,
			`spec.controllers[0].pipeline: unknown pipeline stage "@frobnicate"`},
		{"stage not a map", `["@select"]`, nil,
			`spec.controllers[0].pipeline[0]: a pipeline stage must be a map with a single "@stage" key, got a string`},
		{"stage with two keys", `[{"@select": true, "@project": {}}]`, nil,
			`spec.controllers[0].pipeline[0]: a pipeline stage must be a map with a single "@stage" key, got a map with 2 keys`},
		{"pipeline not a stage", `"$.x"`, nil,
			`spec.controllers[0].pipeline: a pipeline must be a stage or a list of stages, got string`},
		{"bad expression", `[{"@select": {"@eq": [1]}}]`, nil,
			`spec.controllers[0].pipeline[0]["@select"]["@eq"]: @eq: expects 2 arguments, got 1`},
		{"bad JSONPath", `{"@select": "$.["}`, nil,
			`spec.controllers[0].pipeline["@select"]: invalid JSONPath`},
		{"join with one source", `[{"@join": true}]`, nil,
			`spec.controllers[0].pipeline[0]: @join needs at least two sources, have 1`},
		{"join not first", `[{"@join": true}, {"@join": true}]`, []string{"Pod", "Service"},
			`spec.controllers[0].pipeline[1]: @join must be the first stage`},
		{"several sources without join", `[{"@select": true}]`, []string{"Pod", "Service"},
			`spec.controllers[0].pipeline[0]: a pipeline over several sources (Pod, Service) must start with @join`},
		{"several sources, empty pipeline", `[]`, []string{"Pod", "Service"},
			`spec.controllers[0].pipeline: a pipeline over several sources (Pod, Service) must start with @join`},
		{"duplicate sources", `{"@join": true}`, []string{"Pod", "Pod"},
			`spec.controllers[0].pipeline: duplicate source kind "Pod"`},
		{"no sources", `{"@select": true}`, []string{},
			`spec.controllers[0].pipeline: a pipeline needs at least one source`},
		{"bad join condition", `{"@join": {"@eq": "$.x"}}`, []string{"A", "B"},
			`spec.controllers[0].pipeline["@join"]["@eq"]: @eq: expects a list of 2 arguments, got string`},
		{"project string", `{"@project": "$.spec"}`, nil,
			`spec.controllers[0].pipeline["@project"]: @project: argument must be a map or a list of maps, got string`},
		{"project empty list", `{"@project": []}`, nil,
			`spec.controllers[0].pipeline["@project"]: @project: needs at least one step`},
		{"project step not a map", `{"@project": [{"a": 1}, "$.x"]}`, nil,
			`spec.controllers[0].pipeline["@project"][1]: @project: a step must be a map, got string`},
		{"unwind not a string", `{"@unwind": ["$.a"]}`, nil,
			`spec.controllers[0].pipeline["@unwind"]: @unwind: argument must be a JSONPath string, got list`},
		{"unwind not singular", `{"@demux": "$.spec.containers[*]"}`, nil,
			`spec.controllers[0].pipeline["@demux"]: @demux: argument must be a singular JSONPath on $, got "$.spec.containers[*]"`},
		{"unwind local", `{"@unwind": "$$.a"}`, nil,
			`spec.controllers[0].pipeline["@unwind"]: @unwind: argument must be a singular JSONPath on $, got "$$.a"`},
		{"unwind root", `{"@unwind": "$"}`, nil,
			`spec.controllers[0].pipeline["@unwind"]: @unwind: invalid setter "$": must start with a member name`},
		{"gather not a pair", `{"@gather": ["$.a"]}`, nil,
			`spec.controllers[0].pipeline["@gather"]: @gather: argument must be a list [key, value], got a list of 1`},
		{"mux value not a path", `{"@mux": ["$.a", {"@len": "$.b"}]}`, nil,
			`spec.controllers[0].pipeline["@mux"][1]: @mux: argument must be a JSONPath string, got map`},
		{"groupBy not a list", `{"@groupBy": "$.a"}`, nil,
			`spec.controllers[0].pipeline["@groupBy"]: @groupBy: argument must be a list [key, value], got a string`},
		{"groupBy bad key", `{"@groupBy": [{"@nope": 1}, "$.a"]}`, nil,
			`spec.controllers[0].pipeline["@groupBy"][0]: unknown operator "@nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sources := tc.sources
			if sources == nil {
				sources = []string{"Pod"}
			}
			_, err := Compile(mustJSON(t, tc.spec), sources, Options{Path: path})
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

func TestCompileAccepts(t *testing.T) {
	for _, spec := range []string{
		`null`,
		`[]`,
		`{"@distinct": null}`,
		`{"@select": {"@gt": ["$.spec.replicas", 1.5]}}`, // json.Number arguments
		`[{"@unwind": "$.spec.containers"}, {"@gather": ["$.metadata.namespace", "$.spec.containers"]}]`,
		`{"@unwind": "$.spec[\"x.y\"][0]"}`,
	} {
		if _, err := Compile(mustJSON(t, spec), []string{"Pod"}, Options{Path: path}); err != nil {
			t.Errorf("Compile(%s): %v", spec, err)
		}
	}
}

func TestEqualities(t *testing.T) {
	sources := []string{"Pod", "Service", "Node"}
	tests := []struct {
		cond string
		want []string // "a=b" with the source order kept
	}{
		{`{"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}`, []string{"Pod.metadata.labels.app=Service.spec.selector.app"}},
		{`{"@eq": ["$.Service.spec.selector.app", "$.Pod.metadata.labels.app"]}`, []string{"Pod.metadata.labels.app=Service.spec.selector.app"}},
		{`{"@and": [{"@eq": ["$.Pod.spec.nodeName", "$.Node.metadata.name"]}, {"@and": [{"@eq": ["$.Pod.a", "$.Service.b"]}]}, true]}`,
			[]string{"Pod.spec.nodeName=Node.metadata.name", "Pod.a=Service.b"}},
		{`{"@eq": ["$.Pod.a", "$.Pod.b"]}`, nil},                // same source
		{`{"@eq": ["$.Pod.a", "x"]}`, nil},                      // a constant
		{`{"@eq": ["$.Pod.a[*]", "$.Service.b"]}`, nil},         // not singular
		{`{"@eq": ["$.Other.a", "$.Service.b"]}`, nil},          // not a source
		{`{"@or": [{"@eq": ["$.Pod.a", "$.Service.b"]}]}`, nil}, // not implied by the condition
		{`{"@not": {"@eq": ["$.Pod.a", "$.Service.b"]}}`, nil},
		{`{"@eq": ["$.Pod.a[0]", "$.Service.b"]}`, []string{"Pod.a[0]=Service.b"}},
	}
	for _, tc := range tests {
		cond, err := expression.Parse(mustJSON(t, tc.cond), "c")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, eq := range equalities(cond, sources) {
			got = append(got, partString(eq.a)+"="+partString(eq.b))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("equalities(%s) = %v, want %v", tc.cond, got, tc.want)
		}
	}
}

func partString(p keyPart) string {
	s := p.kind
	for _, seg := range p.segs {
		if seg.IsIndex {
			s += seg.String()
		} else {
			s += "." + seg.Name
		}
	}
	return s
}

func pod(name, app string) dbsp.Document {
	return dbsp.Document{
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": app}},
		"spec":     map[string]any{"replicas": int64(1)},
	}
}

func TestProcessTraceAndReset(t *testing.T) {
	var traced []string
	p, err := Compile(mustJSON(t, `[
		{"@select": {"@eq": ["$.metadata.labels.app", "web"]}},
		{"@project": {"metadata": {"name": "$.metadata.name"}}}
	]`), []string{"Pod"}, Options{Path: path, Trace: func(stage string, d *dbsp.ZSet) {
		traced = append(traced, stage+":"+strings.Repeat("+", d.Len()))
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Process(map[string]*dbsp.ZSet{"Pod": dbsp.FromDocuments(pod("a", "web"), pod("b", "db"))})
	if err != nil {
		t.Fatal(err)
	}
	want := dbsp.FromDocuments(dbsp.Document{"metadata": map[string]any{"name": "a"}})
	if !out.Equal(want) {
		t.Fatalf("Process = %v", out)
	}
	if got := strings.Join(traced, " "); got != path+`[0]["@select"]:+ `+path+`[1]["@project"]:+` {
		t.Fatalf("trace = %s", got)
	}
	// An update: delete old + insert new.
	upd := dbsp.NewZSet()
	upd.Insert(pod("a", "web"), -1)
	upd.Insert(pod("a", "db"), 1)
	out, err = p.Process(map[string]*dbsp.ZSet{"Pod": upd})
	if err != nil || !out.Equal(want.Negate()) {
		t.Fatalf("update: %v %v", out, err)
	}
	if _, err := p.Process(map[string]*dbsp.ZSet{"Service": dbsp.NewZSet()}); err == nil ||
		err.Error() != `spec.controllers[0].pipeline: unknown source kind "Service" (sources: Pod)` {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := p.Evaluate(map[string]*dbsp.ZSet{"Service": dbsp.NewZSet()}); err == nil {
		t.Fatal("Evaluate accepted an unknown kind")
	}
}

// TestStatefulReset checks that Reset returns every stateful stage to
// time zero and that Evaluate leaves the incremental state alone.
func TestStatefulReset(t *testing.T) {
	p, err := Compile(mustJSON(t, `[
		{"@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Svc.spec.app"]}},
		{"@project": {"app": "$.Svc.spec.app", "pod": "$.Pod.metadata.name"}},
		{"@groupBy": ["$.app", "$.pod"]}
	]`), []string{"Pod", "Svc"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*dbsp.ZSet{
		"Pod": dbsp.FromDocuments(pod("a", "web"), pod("b", "web")),
		"Svc": dbsp.FromDocuments(dbsp.Document{"spec": map[string]any{"app": "web"}}),
	}
	want := dbsp.FromDocuments(dbsp.Document{"key": "web", "values": []any{"a", "b"}})
	for i := 0; i < 2; i++ {
		out, err := p.Process(in)
		if err != nil || !out.Equal(want) {
			t.Fatalf("round %d: Process = %v, %v", i, out, err)
		}
		snap, err := p.Evaluate(in)
		if err != nil || !snap.Equal(want) {
			t.Fatalf("round %d: Evaluate = %v, %v", i, snap, err)
		}
		p.Reset()
	}
}

// TestErrorsKeepState checks that a per-document error drops only that
// document and that the state stays consistent for later changes.
func TestErrorsKeepState(t *testing.T) {
	p, err := Compile(mustJSON(t, `[
		{"@project": {"metadata": "$.metadata", "n": {"@int": "$.spec.n"}}},
		{"@gather": ["$.metadata.namespace", "$.n"]}
	]`), []string{"Pod"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(name, n string) dbsp.Document {
		return dbsp.Document{"metadata": map[string]any{"name": name, "namespace": "ns"}, "spec": map[string]any{"n": n}}
	}
	good, bad := doc("a", "1"), doc("b", "x")
	out, err := p.Process(map[string]*dbsp.ZSet{"Pod": dbsp.FromDocuments(good, bad)})
	if err == nil || !strings.Contains(err.Error(), `spec.controllers[0].pipeline[0]["@project"].n["@int"]`) ||
		!strings.Contains(err.Error(), "(document ns/b)") {
		t.Fatalf("error = %v", err)
	}
	want := dbsp.FromDocuments(dbsp.Document{"metadata": map[string]any{"name": "a", "namespace": "ns"}, "n": []any{int64(1)}})
	if !out.Equal(want) {
		t.Fatalf("output = %v", out)
	}
	// Deleting the bad document fails again but changes nothing; fixing it
	// adds its value.
	d := dbsp.NewZSet()
	d.Insert(bad, -1)
	d.Insert(doc("b", "2"), 1)
	out, err = p.Process(map[string]*dbsp.ZSet{"Pod": d})
	if err == nil {
		t.Fatal("deleting the bad document did not fail again")
	}
	fixed := dbsp.FromDocuments(dbsp.Document{"metadata": map[string]any{"name": "a", "namespace": "ns"}, "n": []any{int64(1), int64(2)}})
	if !out.Equal(fixed.Minus(want)) {
		t.Fatalf("output = %v", out)
	}
}

// TestProjectRetractsWhatItEmitted: a @project over the source objects
// remembers its results, so an update retracts the document the old version
// gave even when the expression is not deterministic (@rnd here): after
// any sequence of updates the integrated output holds exactly one document
// per live object, each with weight 1.
func TestProjectRetractsWhatItEmitted(t *testing.T) {
	p, err := Compile(mustJSON(t, `[
		{"@select": {"@eq": ["$.metadata.namespace", "default"]}},
		{"@project": {"metadata": {"name": "$.metadata.name"}, "spec": {"r": {"@rnd": [0, 1000000000]}, "app": "$.metadata.labels.app"}}}
	]`), []string{"Pod"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	total := dbsp.NewZSet()
	live := map[string]dbsp.Document{}
	step := func(d *dbsp.ZSet) {
		t.Helper()
		out, err := p.Process(map[string]*dbsp.ZSet{"Pod": d})
		if err != nil {
			t.Fatal(err)
		}
		total.Add(out)
	}
	for i := 0; i < 50; i++ {
		name := fmt.Sprintf("p%d", i%5)
		d := dbsp.NewZSet()
		if old, ok := live[name]; ok {
			d.Insert(old, -1)
		}
		if i%7 == 6 {
			delete(live, name)
		} else {
			live[name] = pod(name, fmt.Sprintf("v%d", i))
			d.Insert(live[name], 1)
		}
		step(d)
		if total.Len() != len(live) {
			t.Fatalf("step %d: %d output documents for %d objects: %v", i, total.Len(), len(live), total)
		}
		total.Range(func(doc dbsp.Document, w int) bool {
			name, _ := doc["metadata"].(map[string]any)["name"].(string)
			app, _ := doc["spec"].(map[string]any)["app"].(string)
			if w != 1 || live[name] == nil || live[name]["metadata"].(map[string]any)["labels"].(map[string]any)["app"] != app {
				t.Fatalf("step %d: output %v with weight %d, objects %v", i, doc, w, live)
			}
			return true
		})
	}
}

// TestProjectMemoSurvivesRefusal: a refused update (a later stage over
// MaxDeltaEntries) leaves what a nondeterministic @project remembered as it
// was, so deleting the object afterwards retracts what was emitted.
func TestProjectMemoSurvivesRefusal(t *testing.T) {
	p, err := Compile(mustJSON(t, `[
		{"@project": {"metadata": {"name": "$.metadata.name"}, "spec": {"list": "$.spec.list", "r": {"@rnd": [0, 1000000000]}}}},
		{"@unwind": "$.spec.list"}
	]`), []string{"Pod"}, Options{Path: path, MaxDeltaEntries: 3})
	if err != nil {
		t.Fatal(err)
	}
	withList := func(n int) dbsp.Document {
		l := []any{}
		for i := 0; i < n; i++ {
			l = append(l, int64(i))
		}
		return dbsp.Document{"metadata": map[string]any{"name": "a"}, "spec": map[string]any{"list": l}}
	}
	total := dbsp.NewZSet()
	step := func(d *dbsp.ZSet) error {
		out, err := p.Process(map[string]*dbsp.ZSet{"Pod": d})
		if err == nil {
			total.Add(out)
		}
		return err
	}
	a, big := withList(1), withList(10)
	if err := step(dbsp.FromDocuments(a)); err != nil {
		t.Fatal(err)
	}
	d := dbsp.NewZSet()
	d.Insert(a, -1)
	d.Insert(big, 1)
	var le *LimitError
	if err := step(d); !errors.As(err, &le) {
		t.Fatalf("want a LimitError, got %v", err)
	}
	d = dbsp.NewZSet()
	d.Insert(a, -1)
	if err := step(d); err != nil {
		t.Fatal(err)
	}
	if !total.IsEmpty() {
		t.Fatalf("after deleting the only object the integrated output is %v", total)
	}
}
