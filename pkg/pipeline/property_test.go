package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/expression"
)

var seeds = []uint64{1, 7, 42, 99, 2024}

const steps = 250

// objects generates random Kubernetes-like objects of one kind. Objects are
// identified by namespace/name: an update replaces the object of a name
// with a new version.
type objects struct {
	kind string
	r    *rand.Rand
	live map[string]dbsp.Document
	gen  func(r *rand.Rand, ns, name string) dbsp.Document
	max  int
}

func (o *objects) state() *dbsp.ZSet {
	z := dbsp.NewZSet()
	for _, d := range o.live {
		z.Insert(d, 1)
	}
	return z
}

func (o *objects) names() []string {
	var ns []string
	for n := range o.live {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// change adds a random create, update or delete to delta.
func (o *objects) change(delta *dbsp.ZSet) {
	names := o.names()
	switch op := o.r.IntN(10); {
	case len(names) == 0 || (op < 4 && len(names) < o.max): // create (or replace)
		ns, name := fmt.Sprintf("ns%d", o.r.IntN(2)), fmt.Sprintf("%s%d", o.kind, o.r.IntN(2*o.max))
		id := ns + "/" + name
		if old, ok := o.live[id]; ok {
			delta.Insert(old, -1)
		}
		o.live[id] = o.gen(o.r, ns, name)
		delta.Insert(o.live[id], 1)
	case op < 8: // update
		id := names[o.r.IntN(len(names))]
		old := o.live[id]
		md := old["metadata"].(map[string]any)
		o.live[id] = o.gen(o.r, md["namespace"].(string), md["name"].(string))
		delta.Insert(old, -1)
		delta.Insert(o.live[id], 1)
	default: // delete
		id := names[o.r.IntN(len(names))]
		delta.Insert(o.live[id], -1)
		delete(o.live, id)
	}
}

func genPod(r *rand.Rand, ns, name string) dbsp.Document {
	labels := map[string]any{"tier": []string{"fe", "be"}[r.IntN(2)]}
	if r.IntN(5) > 0 {
		labels["app"] = fmt.Sprintf("a%d", r.IntN(3))
	}
	containers := make([]any, r.IntN(4))
	for i := range containers {
		containers[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": fmt.Sprintf("img%d", r.IntN(3))}
	}
	return dbsp.Document{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec":     map[string]any{"containers": containers, "nodeName": fmt.Sprintf("Node%d", r.IntN(3)), "replicas": int64(r.IntN(3))},
		"status":   map[string]any{"podIP": fmt.Sprintf("10.0.0.%d", r.IntN(4))},
	}
}

func genService(r *rand.Rand, ns, name string) dbsp.Document {
	return dbsp.Document{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"selector": map[string]any{"app": fmt.Sprintf("a%d", r.IntN(3))}},
	}
}

func genNode(r *rand.Rand, ns, name string) dbsp.Document {
	return dbsp.Document{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"zone": fmt.Sprintf("z%d", r.IntN(2))}},
	}
}

var generators = map[string]func(*rand.Rand, string, string) dbsp.Document{
	"Pod": genPod, "Service": genService, "Node": genNode,
}

// propertyCases are the pipelines of the property tests.
var propertyCases = []struct {
	name    string
	sources []string
	spec    string
	outputs []string // Options.Outputs, for the branch form
}{
	{"select", []string{"Pod"}, `{"@select": {"@eq": ["$.metadata.labels.app", "a1"]}}`, nil},
	{"project", []string{"Pod"}, `{"@project": {"metadata": {"name": "$.metadata.name"}, "n": {"@len": "$.spec.containers"}}}`, nil},
	{"project list", []string{"Pod"}, `{"@project": [
			{"metadata": "$.metadata", "app": "$.metadata.labels.app"},
			{"metadata": {"name": "$.metadata.name"}, "$.metadata.labels.app": "$.app"}]}`, nil},
	{"project list copy", []string{"Pod"}, `{"@project": [
			{"$.": "$."},
			{"$.metadata.labels.copied": "yes", "spec": {"containers": [{"name": "extra"}]}}]}`, nil},
	{"select+project", []string{"Pod"}, `[
			{"@select": {"@gte": [{"@len": "$.spec.containers"}, 1]}},
			{"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace",
				"annotations": {"images": {"@join": [{"@map": ["$$.image", "$.spec.containers"]}, ","]}}}}}]`, nil},
	{"unwind", []string{"Pod"}, `{"@unwind": "$.spec.containers"}`, nil},
	{"gather", []string{"Pod"}, `{"@gather": ["$.metadata.labels.app", "$.spec.nodeName"]}`, nil},
	{"unwind+gather", []string{"Pod"}, `[
			{"@project": {"metadata": "$.metadata", "spec": "$.spec", "owner": {"@concat": ["$.metadata.namespace", "/", "$.metadata.name"]}}},
			{"@unwind": "$.spec.containers"},
			{"@gather": ["$.owner", "$.spec.containers"]}]`, nil},
	{"groupBy", []string{"Pod"}, `{"@groupBy": ["$.metadata.labels.app", "$.metadata.name"]}`, nil},
	{"project+distinct", []string{"Pod"}, `[{"@project": {"app": "$.metadata.labels.app", "node": "$.spec.nodeName"}}, {"@distinct": {}}]`, nil},
	{"join+project", []string{"Pod", "Service"}, `[
			{"@join": {"@and": [
				{"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]},
				{"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}]}},
			{"@project": {"metadata": {"name": {"@concat": ["$.Service.metadata.name", "-", "$.Pod.metadata.name"]}}, "ip": "$.Pod.status.podIP"}}]`, nil},
	{"join without keys", []string{"Pod", "Service"}, `[
			{"@join": {"@selector": ["$.Service.spec.selector", "$.Pod.metadata.labels"]}},
			{"@project": {"pod": "$.Pod.metadata.name", "svc": "$.Service.metadata.name"}}]`, nil},
	{"three-way join", []string{"Pod", "Service", "Node"}, `[
			{"@join": {"@and": [
				{"@eq": ["$.Service.spec.selector.app", "$.Pod.metadata.labels.app"]},
				{"@eq": ["$.Node.metadata.name", "$.Pod.spec.nodeName"]},
				{"@neq": ["$.Node.metadata.labels.zone", "z1"]}]}},
			{"@project": {"pod": "$.Pod.metadata.name", "svc": "$.Service.metadata.name", "node": "$.Node.metadata.name"}}]`, nil},
	{"join+groupBy", []string{"Pod", "Service"}, `[
			{"@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}},
			{"@groupBy": [{"@concat": ["$.Service.metadata.namespace", "/", "$.Service.metadata.name"]}, "$.Pod.status.podIP"]}]`, nil},
	{"left join+groupBy", []string{"Pod", "Service"}, `[
			{"@join": [{"@and": [
				{"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]},
				{"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]},
				{"@eq": ["$.Pod.metadata.labels.tier", "fe"]}]}, {"soft": ["Pod"]}]},
			{"@groupBy": [{"@concat": ["$.Service.metadata.namespace", "/", "$.Service.metadata.name"]}, "$.Pod.metadata.name"]}]`, nil},
	{"left join, hard filter, no keys", []string{"Pod", "Service"}, `[
			{"@join": [{"@and": [
				{"@selector": ["$.Service.spec.selector", "$.Pod.metadata.labels"]},
				{"@neq": ["$.Pod.metadata.labels.tier", "be"]}]}, {"soft": ["Service"], "index": {"Pod": "$.metadata.labels.app"}}]},
			{"@project": {"pod": "$.Pod.metadata.name", "svc": "$.Service.metadata.name"}}]`, nil},
	{"left join, two soft kinds", []string{"Pod", "Service", "Node"}, `[
			{"@join": [{"@and": [
				{"@eq": ["$.Service.spec.selector.app", "$.Pod.metadata.labels.app"]},
				{"@eq": ["$.Node.metadata.name", "$.Pod.spec.nodeName"]},
				{"@neq": ["$.Node.metadata.labels.zone", "z1"]}]}, {"soft": ["Pod", "Node"]}]},
			{"@project": {"pod": "$.Pod.metadata.name", "svc": "$.Service.metadata.name", "node": "$.Node.metadata.name"}}]`, nil},
	{"left join, two hard kinds", []string{"Pod", "Service", "Node"}, `[
			{"@join": [{"@and": [
				{"@eq": ["$.Service.spec.selector.app", "$.Pod.metadata.labels.app"]},
				{"@eq": ["$.Node.metadata.name", "$.Pod.spec.nodeName"]}]}, {"soft": ["Node"]}]},
			{"@project": {"pod": "$.Pod.metadata.name", "svc": "$.Service.metadata.name", "node": "$.Node.metadata.name"}}]`, nil},
	{"branches: two targets, a shared stream", []string{"Pod", "Service"}, `[
			[{"@inputs": ["Pod"]}, {"@select": {"@eq": ["$.metadata.labels.tier", "fe"]}}, {"@output": "fe"}],
			[{"@inputs": ["fe", "Service"]},
				{"@join": {"@and": [
					{"@eq": ["$.fe.metadata.labels.app", "$.Service.spec.selector.app"]},
					{"@eq": ["$.fe.metadata.namespace", "$.Service.metadata.namespace"]}]}},
				{"@project": {"metadata": {"name": {"@concat": ["$.Service.metadata.name", "-", "$.fe.metadata.name"]}}, "ip": "$.fe.status.podIP"}},
				{"@output": "Endpoint"}],
			[{"@inputs": ["fe"]}, {"@groupBy": ["$.spec.nodeName", "$.metadata.name"]}, {"@output": "NodeReport"}]]`,
		[]string{"Endpoint", "NodeReport"}},
	{"branches: union then groupBy and distinct", []string{"Pod"}, `[
			[{"@inputs": ["Pod"]}, {"@project": {"k": "$.metadata.labels.app", "v": "$.spec.nodeName"}}, {"@output": "s"}],
			[{"@inputs": ["Pod"]}, {"@select": {"@eq": ["$.metadata.labels.tier", "be"]}},
				{"@unwind": "$.spec.containers"}, {"@project": {"k": "$.metadata.labels.app", "v": "$.spec.containers.image"}}, {"@output": "s"}],
			[{"@inputs": ["s"]}, {"@groupBy": ["$.k", "$.v"]}, {"@output": "Groups"}],
			[{"@inputs": ["s"]}, {"@distinct": null}, {"@output": "Set"}]]`,
		[]string{"Groups", "Set"}},
	{"branches: left join of two streams", []string{"Pod", "Service"}, `[
			[{"@inputs": ["Service"]}, {"@project": {"metadata": "$.metadata", "app": "$.spec.selector.app"}}, {"@output": "svc"}],
			[{"@inputs": ["Pod"]}, {"@unwind": "$.spec.containers"}, {"@output": "ctr"}],
			[{"@inputs": ["svc", "ctr"]},
				{"@join": [{"@eq": ["$.svc.app", "$.ctr.metadata.labels.app"]}, {"soft": ["ctr"]}]},
				{"@groupBy": ["$.svc.metadata.name", "$.ctr.spec.containers.image"]},
				{"@output": "Images"}]]`,
		[]string{"Images"}},
	// A stream written by two branches (a Pod in both is in it twice) and
	// read by two left joins, soft on either side.
	{"branches: left joins over a unioned stream read twice", []string{"Pod", "Service"}, `[
			[{"@inputs": ["Pod"]}, {"@select": {"@eq": ["$.metadata.labels.tier", "fe"]}}, {"@output": "p"}],
			[{"@inputs": ["Pod"]}, {"@select": {"@eq": ["$.metadata.labels.app", "a0"]}}, {"@output": "p"}],
			[{"@inputs": ["Service", "p"]},
				{"@join": [{"@and": [
					{"@eq": ["$.Service.spec.selector.app", "$.p.metadata.labels.app"]},
					{"@eq": ["$.Service.metadata.namespace", "$.p.metadata.namespace"]}]}, {"soft": ["p"]}]},
				{"@groupBy": ["$.Service.metadata.name", "$.p.metadata.name"]},
				{"@output": "Counts"}],
			[{"@inputs": ["p", "Service"]},
				{"@join": [{"@eq": ["$.Service.spec.selector.app", "$.p.metadata.labels.app"]}, {"soft": ["Service"]}]},
				{"@project": {"pod": "$.p.metadata.name", "svc": "$.Service.metadata.name"}},
				{"@output": "Matches"}]]`,
		[]string{"Counts", "Matches"}},
}

// successorPropertyCases are pipelines of the property tests compiled in
// the successor's dialect (expression.DialectDBSP).
var successorPropertyCases = []struct {
	name    string
	sources []string
	spec    string
}{
	{"successor unwind+groupBy distinct", []string{"Pod"}, `[
			{"@project": {"metadata": "$.metadata", "c": {"@enumerate": "$.spec.containers"}}},
			{"@unwind": "$.c"},
			{"@groupBy": ["$.metadata.labels.app", "$.c.value.image", {"distinct": true}]}]`},
	{"successor left join+groupBy documents", []string{"Pod", "Service"}, `[
			{"@join": [{"@and": [
				{"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]},
				{"@eq": ["$.Pod.metadata.namespace", "$.Service.metadata.namespace"]}]}, {"soft": ["Pod"]}]},
			{"@groupBy": ["$.Service.metadata.name", "$.Pod.metadata.name"]},
			"@distinct"]`},
}

func TestPipelineProperty(t *testing.T) {
	type dialectCase struct {
		name    string
		sources []string
		spec    string
		dialect expression.Dialect
		outputs []string
	}
	var cases []dialectCase
	for _, tc := range propertyCases {
		cases = append(cases, dialectCase{tc.name, tc.sources, tc.spec, "", tc.outputs})
	}
	for _, tc := range successorPropertyCases {
		cases = append(cases, dialectCase{tc.name, tc.sources, tc.spec, expression.DialectDBSP, nil})
	}
	for _, tc := range cases {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				p, err := Compile(mustJSON(t, tc.spec), tc.sources, Options{Path: path, Dialect: tc.dialect, Outputs: tc.outputs})
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(seed, 3))
				srcs := map[string]*objects{}
				for _, kind := range tc.sources {
					srcs[kind] = &objects{kind: kind, r: r, live: map[string]dbsp.Document{}, gen: generators[kind], max: 8}
				}
				if o := srcs["Node"]; o != nil {
					o.max = 2 // names Node0..Node3, as in the pods' spec.nodeName
				}
				maxOut := map[string]int{}
				outs := map[string]*dbsp.Integrate{}
				for _, name := range p.Outputs() {
					outs[name] = dbsp.NewIntegrate()
				}
				for step := 0; step < steps; step++ {
					deltas := map[string]*dbsp.ZSet{}
					for n := 1 + r.IntN(3); n > 0; n-- {
						kind := tc.sources[r.IntN(len(tc.sources))]
						if deltas[kind] == nil {
							deltas[kind] = dbsp.NewZSet()
						}
						srcs[kind].change(deltas[kind])
					}
					state := map[string]*dbsp.ZSet{}
					for kind, o := range srcs {
						state[kind] = o.state()
					}
					var ds, wants map[string]*dbsp.ZSet
					if tc.outputs == nil {
						d, err := p.Process(deltas)
						if err != nil {
							t.Fatalf("step %d: Process: %v", step, err)
						}
						want, err := p.Evaluate(state)
						if err != nil {
							t.Fatalf("step %d: Evaluate: %v", step, err)
						}
						ds, wants = map[string]*dbsp.ZSet{"": d}, map[string]*dbsp.ZSet{"": want}
					} else {
						if ds, err = p.ProcessOutputs(context.Background(), deltas); err != nil {
							t.Fatalf("step %d: ProcessOutputs: %v", step, err)
						}
						if wants, err = p.EvaluateOutputs(state); err != nil {
							t.Fatalf("step %d: EvaluateOutputs: %v", step, err)
						}
					}
					if len(ds) != len(outs) || len(wants) != len(outs) {
						t.Fatalf("step %d: %d changes and %d collections for outputs %q", step, len(ds), len(wants), p.Outputs())
					}
					for name, want := range wants {
						if got := outs[name].Step(ds[name]); !got.Equal(want) {
							t.Fatalf("step %d: output %q: integrated Process output differs from Evaluate:\n got %v\nwant %v", step, name, got, want)
						}
						maxOut[name] = max(maxOut[name], want.Len())
					}
				}
				for name, n := range maxOut {
					if n < 2 {
						t.Fatalf("output %q never had more than %d documents: the test checks little", name, n)
					}
				}
			})
		}
	}
}
