package expression

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// fuzzSeeds are valid and invalid specs; they run as plain tests too.
var fuzzSeeds = []string{
	`{"metadata": {"name": "$.metadata.name", "annotations": {"n": {"@string": {"@len": ["$.spec.containers"]}}}}}`,
	`"$.spec.containers[*].name"`,
	`"$$"`,
	`"$..image"`,
	`"$.spec.containers[?@.name == 'c1']"`,
	`"$.spec.containers[?length(@.ports) > 0].name"`,
	`"$["`,
	`"$.a[-1]"`,
	`{"@len": true}`,
	`{"@frobnicate": 1}`,
	`{"@len": 1, "x": 2}`,
	`{"$.metadata.annotations.a": "x", "b": 1}`,
	`{"$.a[0].b": 1}`,
	`{"$[0]": 1}`,
	`{"@and": [true, {"@or": [false, "$.status.ready"]}]}`,
	`{"@cond": [{"@gt": ["$.spec.replicas", 1]}, "many", "few"]}`,
	`{"@switch": [[false, 1], [true, 2]]}`,
	`{"@switch": [1]}`,
	`{"@map": [{"@concat": ["$$.name", ":", "$$.image"]}, "$.spec.containers"]}`,
	`{"@filter": [{"@exists": "$$.ports"}, "$.spec.containers"]}`,
	`{"@fold": [{"@add": ["$$.acc", 1]}, 0, "$.spec.containers"]}`,
	`{"@sortBy": ["$$.name", "$.spec.containers"]}`,
	`{"@dict": [["a", 1], ["b", {"@range": [1, 4]}]]}`,
	`{"@div": [{"@sum": "$.status.counts"}, 0]}`,
	`{"@mod": [-9223372036854775808, -1]}`,
	`{"@substring": ["héllo", -1, 100]}`,
	`{"@regexp": ["(", "x"]}`,
	`{"@regexp": [{"@string": 1}, "1"]}`,
	`{"@selector": [{"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, "$.metadata.labels"]}`,
	`{"@selector": [{"matchExpressions": [{"key": "", "operator": "Bogus"}]}, null]}`,
	`{"@cel": "self.spec.replicas * 2"}`,
	`{"@cel": "self.metadata.labels.exists(k, k.startsWith('app'))"}`,
	`{"@cel": "self.nope +"}`,
	`{"@cel": "[1, 2].map(x, x / 0)"}`,
	`{"@hash": "$"}`,
	`{"@rnd": [0, 10]}`,
	`"@now"`,
	`{"@noop": {"@len": "$.x"}}`,
	`{"@int": "1e400"}`,
	`{"@floor": 1e300}`,
	`{"@string": [[1.5, -0.0, 1e-9, 1e21]]}`,
	`{"@in": [{"a": 1}, [{"a": 1.0}]]}`,
	`{"@any": [{"@eq": ["$$", 2]}, [1, 2]]}`,
	`{"@all": [[true, null]]}`,
	`{"@range": 10000000000}`,
	`{"@replace": ["abc", "", "--"]}`,
	`[{"@min": []}, {"@max": [1, "a"]}]`,
	`{"@dict": {"a": "$.kind", "$.b.c": 1}}`,
	`{"@exists": "$$[?@ > 1]"}`,
	`{"@cel": "self.spec.containers.filter(c, has(c.ports)).size()"}`,
	`{"@not": {"@not": {"@not": {"@not": [[[[true]]]]}}}}`,
	`{"@join": [{"@split": ["a.b.c", "."]}, "/"]}`,
	`{"@contains": ["$.status.counts", 1]}`,
	`"$."`,
	`{"@map": ["$$.", "$.spec.containers"]}`,
	`{"$.": "$.metadata", "$.x": 1, "y": 2}`,
	`{"$.": "$.kind"}`,
	`{"$.y[3]": 12}`,
	`{"$.y[2][1].z": 1, "$.y[-4]": 0}`,
	`"$.spec.containers[?(@.name=='container-1')].image"`,
	`{"@eq": ["$.spec.containers[?(@.name in ['container-2','x'])].name", "container-2"]}`,
	`"$.spec.containers[?@.name in [1, 2.5e3, true, null, \"a\"] || !(@.image in [])]"`,
	`"$.spec.containers[?(@.name in ['a',,])]"`,
	`"$.spec.containers[?(@.name in @.image)]"`,
	`"$[?in]"`,
	`{"@exists": "$.spec[?@[0].name in ['container-1']][1]"}`,
	`{"@hash": {"@noop": {"name": "web", "port": 80}}}`,
	`{"@float": "NaN"}`,
	`{"@float": "-Infinity"}`,
	`{"@mul": [1e200, 1e200, 0]}`,
	`{"@div": [1e308, 1e-308]}`,
	`{"@sum": [[1e308, 1e308]]}`,
	`{"@cel": "[1.0 / 0.0]"}`,
	`{"@cel": "double('nan')"}`,
	// Over the budget: n² values, a quadratic string, a shared value of
	// 2⁶⁰ nodes, nesting deeper than any walk should go.
	`{"x": {"@map": [{"@range": 65536}, {"@range": 65536}]}}`,
	`{"@fold": [{"@concat": ["$$.acc", "x"]}, "", {"@range": 65536}]}`,
	`{"@string": {"@fold": [["$$.acc", "$$.acc"], [], {"@range": 60}]}}`,
	`{"@eq": [{"@fold": [["$$.acc", "$$.acc"], [], {"@range": 60}]}, {"@fold": [["$$.acc", "$$.acc"], [], {"@range": 60}]}]}`,
	`{"@fold": [["$$.acc"], [], {"@range": 65536}]}`,
	`{"@map": [{"$.y[65535]": "$$"}, {"@range": 65536}]}`,
	`{"@split": [{"@join": [{"@range": 65536}, ""]}, ""]}`,
	`{"@cel": "self.spec.containers.map(c, [1, 2, 3, 4, 5, 6, 7, 8].map(x, [1, 2, 3, 4, 5, 6, 7, 8].map(y, x * y)))"}`,
	// The successor's operators, and those whose meaning depends on the
	// dialect (each seed runs in every dialect).
	`{"@literal": {"@type": "t", "p": "$.x"}}`,
	`[{"@nil": null}, {"@nil": {"a": 1}}, {"@noop": {}}]`,
	`{"@enumerate": "$.spec.containers"}`,
	`{"@getField": {"@concat": [{"@literal": "$.spec"}, ".containers[0]"]}}`,
	`{"@getField": {"@literal": "$["}}`,
	`{"@setField": ["$.metadata.labels.x", {"@getField": "$.kind"}]}`,
	`{"@map": [{"@setField": ["$$.ports[65535]", 1]}, "$.spec.containers"]}`,
	`[{"@lexmin": "$.spec.containers"}, {"@lexmax": [1, "1", null, [1], {"a": 1e308}]}]`,
	`{"@sqlbool": ["$.status.ready", "t", 0.0]}`,
	`{"@range": [-3]}`,
	`{"@substring": ["héllo", -9223372036854775808, 9223372036854775807]}`,
	`{"@hash": {"@range": 65536}}`,
	`{"@div": [-9223372036854775808, -1]}`,
	`{"@rnd": [9223372036854775807, -9223372036854775808]}`,
	`{"@rnd": [-1e308, 1e308]}`,
	`{"@sortBy": [{"@cond": [{"@lt": ["$$.a", "$$.b"]}, -1, 1]}, {"@range": 65536}]}`,
	`{"@sortBy": ["$$.a", [1, 2]]}`,
	`{"@definedOr": [{"@int": "x"}, {"@fold": [["$$.acc", "$$.acc"], [], {"@range": 60}]}, 1]}`,
}

// fuzzLimits is the budget of a fuzzed evaluation; fuzzTime and fuzzBytes
// bound the time it may take and the bytes it may allocate. What a budget
// allows is linear in it, so a smaller one than DefaultLimits keeps the
// fuzzer fast while checking the same bounds.
var fuzzLimits = Limits{Steps: 1 << 20, Values: 1 << 18, Bytes: 1 << 24}

const (
	fuzzTime  = 5 * time.Second
	fuzzBytes = 512 << 20
)

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	subject := Normalize(decode(f, podJSON))
	before := canonicalJSON(subject)
	now := time.Date(2024, 10, 3, 13, 30, 11, 0, time.UTC)
	check := func(t *testing.T, spec any) { checkFuzz(t, spec, subject, before, now) }
	f.Fuzz(func(t *testing.T, s string) {
		// Specs decoded with json.Number and with float64 numbers.
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var spec, floats any
		if err := dec.Decode(&spec); err != nil {
			return
		}
		if err := json.Unmarshal([]byte(s), &floats); err == nil {
			check(t, floats)
		}
		check(t, spec)
	})
}

// FuzzQuery checks JSONPath parsing with Δ-controller's extensions: no
// panic, errors are *Error, the `in` rewrite is idempotent (its output has
// no `in` left to rewrite), and values are in the data model.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"$.", "$$.", "$.a[?(@.b in ['x', 'y'])].c", "$[?@ in [1, 2]]", "$[?(@.x in [])]",
		"$[?@.a in ['],[', \"in\"] && @.b in [true]]", "$[?(@['in'] in ['in'])]", "$[?in [1]]",
		"$.a[?(@.t=='Ready')].s", "$..a[?@ in [1]]", "$[?(@.x in ['a'",
	} {
		f.Add(s)
	}
	subject := Normalize(decode(f, podJSON))
	f.Fuzz(func(t *testing.T, text string) {
		if !strings.HasPrefix(text, "$") {
			return
		}
		if r, err := rewriteIn(text); err == nil {
			if again, err := rewriteIn(r); err != nil || again != r {
				t.Fatalf("rewriteIn(%q) = %q, rewritten again %q, %v", text, r, again, err)
			}
		}
		q, err := ParseQuery(text)
		if err != nil {
			var ee *Error
			if !errors.As(err, &ee) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			return
		}
		v, _ := q.Get(subject)
		if !isModel(v, 0) {
			t.Fatalf("result %#v is not in the data model", v)
		}
		if q.Singular() && q.First() {
			t.Fatal("query both singular and filter-only")
		}
	})
}

// checkFuzz parses and evaluates one spec and checks the invariants: errors
// are *Error, results are in the data model and hold no NaN or ±Inf (JSON
// cannot carry them), the subject is unchanged.
func checkFuzz(t *testing.T, spec any, subject any, before string, now time.Time) {
	for _, d := range []Dialect{DialectDeltaController, DialectDBSP} {
		checkFuzzIn(t, d, spec, subject, before, now)
	}
}

// checkFuzzIn is checkFuzz in dialect d.
func checkFuzzIn(t *testing.T, d Dialect, spec any, subject any, before string, now time.Time) {
	e, err := ParseWith(spec, "fuzz", ParseOptions{Dialect: d})
	if err != nil {
		var ee *Error
		if !errors.As(err, &ee) {
			t.Fatalf("parse error %v (%T) is not an *Error", err, err)
		}
		return
	}
	b := NewBudget(nil, fuzzLimits)
	ctx := &Context{Subject: subject, Now: func() time.Time { return now }, Rand: rand.New(rand.NewPCG(1, 2)), Budget: b}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	allocs, start := sample[0].Value.Uint64(), time.Now()
	v, err := Run(e, ctx)
	metrics.Read(sample)
	if took, alloc := time.Since(start), sample[0].Value.Uint64()-allocs; took > fuzzTime || alloc > fuzzBytes {
		t.Fatalf("evaluation took %s and allocated %d MiB (used %+v of the budget)", took, alloc>>20, b.Used())
	}
	if err != nil {
		var ee *Error
		if !errors.As(err, &ee) {
			t.Fatalf("eval error %v (%T) is not an *Error", err, err)
		}
		return
	}
	if !isModel(v, 0) {
		t.Fatalf("result %#v is not in the data model", v)
	}
	if !isFinite(v, 0) {
		t.Fatalf("result %#v holds a non-finite number", v)
	}
	_ = toString(v)
	if after := canonicalJSON(subject); after != before {
		t.Fatalf("evaluation modified the subject")
	}
}

// isModel reports whether v consists only of model types.
func isModel(v any, depth int) bool {
	if depth > 1000 {
		return true
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return true
	case []any:
		for _, e := range x {
			if !isModel(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isModel(e, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// isFinite reports whether every number in v is finite.
func isFinite(v any, depth int) bool {
	if depth > 1000 {
		return true
	}
	switch x := v.(type) {
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, e := range x {
			if !isFinite(e, depth+1) {
				return false
			}
		}
	case map[string]any:
		for _, e := range x {
			if !isFinite(e, depth+1) {
				return false
			}
		}
	}
	return true
}
