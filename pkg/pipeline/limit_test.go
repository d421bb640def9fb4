package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// fanOut builds two lists of n numbers and unwinds both: n² documents from
// one input document.
const fanOut = `[
	{"@project": {"metadata": "$.metadata", "a": {"@range": %d}, "b": {"@range": %d}}},
	{"@unwind": "$.a"},
	{"@unwind": "$.b"}]`

func configMap(name string, data map[string]any) dbsp.Document {
	return dbsp.Document{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "data": data}
}

// TestFanOutLimit: one object that unwinds into 10⁶ documents fails with an
// error naming the stage and the count, and the step stops at the limit
// instead of building the million documents.
func TestFanOutLimit(t *testing.T) {
	p, err := Compile(mustJSON(t, fmt.Sprintf(fanOut, 1000, 1000)), []string{"ConfigMap"}, Options{Path: path, MaxDeltaEntries: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := p.Process(map[string]*dbsp.ZSet{"ConfigMap": dbsp.FromDocuments(configMap("x", nil))})
	runtime.ReadMemStats(&after)
	var le *LimitError
	if !errors.As(err, &le) || out != nil {
		t.Fatalf("got %d entries and %v, want a limit error", out.Len(), err)
	}
	want := `spec.controllers[0].pipeline[2]["@unwind"]: the change would make this stage emit 1000000 entries, over the limit of 10000`
	if err.Error() != want {
		t.Fatalf("error\n got %s\nwant %s", err, want)
	}
	// A million unwound documents take hundreds of MB; the bounded step
	// builds about 10⁴.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("the failed step allocated %d MB", alloc>>20)
	}
	// Within the limit the same pipeline runs.
	small, err := Compile(mustJSON(t, fmt.Sprintf(fanOut, 10, 10)), []string{"ConfigMap"}, Options{Path: path, MaxDeltaEntries: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := small.Process(map[string]*dbsp.ZSet{"ConfigMap": dbsp.FromDocuments(configMap("x", nil))}); err != nil || out.Len() != 100 {
		t.Fatalf("got %d entries, %v", out.Len(), err)
	}
}

func TestLimitErrorStages(t *testing.T) {
	docs := dbsp.NewZSet()
	for i := 0; i < 5; i++ {
		docs.Insert(configMap(fmt.Sprint("c", i), map[string]any{"k": fmt.Sprint(i % 2), "l": []any{"a", "b", "c"}}), 1)
	}
	tests := []struct {
		name, spec string
		sources    []string
		in         map[string]*dbsp.ZSet
		want       string
	}{
		{"first stage checked when done", `[{"@select": true}]`, []string{"ConfigMap"},
			map[string]*dbsp.ZSet{"ConfigMap": docs},
			`spec.controllers[0].pipeline[0]["@select"]: the change would make this stage emit 5 entries, over the limit of 4`},
		{"unwind", `{"@unwind": "$.data.l"}`, []string{"ConfigMap"},
			map[string]*dbsp.ZSet{"ConfigMap": docs},
			`spec.controllers[0].pipeline["@unwind"]: the change would make this stage emit 15 entries, over the limit of 4`},
		{"join", `[{"@join": {"@eq": ["$.A.data.k", "$.B.data.k"]}}]`, []string{"A", "B"},
			map[string]*dbsp.ZSet{"A": docs, "B": docs},
			`spec.controllers[0].pipeline[0]["@join"]: the change makes this stage emit more than 4 entries (the limit)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(mustJSON(t, tc.spec), tc.sources, Options{Path: path, MaxDeltaEntries: 4})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Process(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error\n got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestLimitKeepsState runs the property pipelines with a small bound: a
// change refused for the bound must leave the circuit as it was, so the
// integrated output of the accepted changes always equals the snapshot of
// the sources without the refused ones.
func TestLimitKeepsState(t *testing.T) {
	const limit = 3
	for _, tc := range propertyCases {
		t.Run(tc.name, func(t *testing.T) {
			accepted, refused := 0, 0
			for _, seed := range seeds {
				p, err := Compile(mustJSON(t, tc.spec), tc.sources, Options{Path: path, MaxDeltaEntries: limit, Outputs: tc.outputs})
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(seed, 9))
				srcs := map[string]*objects{}
				for _, kind := range tc.sources {
					srcs[kind] = &objects{kind: kind, r: r, live: map[string]dbsp.Document{}, gen: generators[kind], max: 8}
				}
				if o := srcs["Node"]; o != nil {
					o.max = 2
				}
				outs := map[string]*dbsp.Integrate{}
				for _, name := range p.Outputs() {
					outs[name] = dbsp.NewIntegrate()
				}
				for step := 0; step < steps; step++ {
					saved := map[string]map[string]dbsp.Document{}
					for kind, o := range srcs {
						saved[kind] = maps.Clone(o.live)
					}
					deltas := map[string]*dbsp.ZSet{}
					for n := 1 + r.IntN(3); n > 0; n-- {
						kind := tc.sources[r.IntN(len(tc.sources))]
						if deltas[kind] == nil {
							deltas[kind] = dbsp.NewZSet()
						}
						srcs[kind].change(deltas[kind])
					}
					var ds map[string]*dbsp.ZSet
					if tc.outputs == nil {
						var d *dbsp.ZSet
						d, err = p.Process(deltas)
						ds = map[string]*dbsp.ZSet{"": d}
					} else {
						ds, err = p.ProcessOutputs(context.Background(), deltas)
					}
					var le *LimitError
					switch {
					case errors.As(err, &le):
						refused++
						for kind, o := range srcs {
							o.live = saved[kind]
						}
					case err != nil:
						t.Fatalf("step %d: %v", step, err)
					default:
						accepted++
						for name, d := range ds {
							// A stage's delta is bounded, not the sum of
							// the branches writing one output.
							if tc.outputs == nil && d.Len() > limit {
								t.Fatalf("step %d: %d entries over the limit", step, d.Len())
							}
							outs[name].Step(d)
						}
					}
					state := map[string]*dbsp.ZSet{}
					for kind, o := range srcs {
						state[kind] = o.state()
					}
					wants, err := p.EvaluateOutputs(state)
					if err != nil {
						t.Fatal(err)
					}
					for name, want := range wants {
						if got := outs[name].Value(); !got.Equal(want) {
							t.Fatalf("seed %d step %d: output %q: integrated output differs from Evaluate:\n got %v\nwant %v", seed, step, name, got, want)
						}
					}
				}
			}
			if accepted == 0 || refused == 0 {
				t.Fatalf("%d changes accepted, %d refused: the test checks little", accepted, refused)
			}
		})
	}
}

// TestUnwindOutputBudget: unwinding a list of n elements copies the rest of
// the document, here another list of n, into every output: n² values to
// hash. The stage refuses the document once its outputs pass the
// evaluation budget's values, quickly and naming the stage, instead of
// taking minutes (n = 60000: 3.6·10⁹ values).
func TestUnwindOutputBudget(t *testing.T) {
	p, err := Compile(mustJSON(t, fmt.Sprintf(fanOut, 60000, 60000)), []string{"ConfigMap"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := p.Process(map[string]*dbsp.ZSet{"ConfigMap": dbsp.FromDocuments(configMap("x", nil))})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the refused step took %s", took)
	}
	want := `spec.controllers[0].pipeline[1]["@unwind"]: @unwind: evaluation exceeded its budget of 2097152 values`
	if err == nil || !strings.Contains(err.Error(), want) || out.Len() != 0 {
		t.Fatalf("got %d entries and error %v, want %s", out.Len(), err, want)
	}
	// An ordinary unwind is far within the budget.
	small, err := Compile(mustJSON(t, fmt.Sprintf(fanOut, 100, 100)), []string{"ConfigMap"}, Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := small.Process(map[string]*dbsp.ZSet{"ConfigMap": dbsp.FromDocuments(configMap("x", nil))}); err != nil || out.Len() != 10000 {
		t.Fatalf("got %d entries, %v", out.Len(), err)
	}
}
