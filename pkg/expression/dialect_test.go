package expression

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// dialects are the dialects every case of TestSuccessorOperators runs in.
var dialects = []Dialect{"", DialectDeltaController, DialectDBSP}

// runDialectCases runs the cases on subject with the expression parsed in
// dialect d.
func runDialectCases(t *testing.T, d Dialect, subject any, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
			before := canonicalJSON(subject)
			e, err := ParseWith(decode(t, tc.spec), "spec.x", ParseOptions{Dialect: d})
			var got any
			if err == nil {
				got, err = Run(e, &Context{Subject: subject, Rand: rand.New(rand.NewPCG(1, 2))})
			}
			if after := canonicalJSON(subject); after != before {
				t.Fatalf("%s modified the subject", tc.spec)
			}
			if tc.err != "" {
				if err == nil {
					t.Fatalf("%s: want error containing %q, got %#v", tc.spec, tc.err, got)
				}
				var ee *Error
				if !errors.As(err, &ee) {
					t.Fatalf("%s: error %v is not an *Error", tc.spec, err)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s: error %q does not contain %q", tc.spec, err.Error(), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: unexpected error: %v", tc.spec, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("%s:\n got  %#v\n want %#v", tc.spec, got, tc.want)
			}
		})
	}
}

// TestSuccessorOperators covers the operators that came with Δ-controller's
// successor and mean the same in every dialect. Cases marked "successor"
// are translated from its expression tests (engine/expression/dbsp); the
// subject is the successor tests' document {name: Alice, age: 30, score:
// 95.5}.
func TestSuccessorOperators(t *testing.T) {
	subject := Normalize(decode(t, `{"name": "Alice", "age": 30, "score": 95.5, "counts": [3, 1, 2],
		"metadata": {"name": "web", "annotations": {"a": "1"}}}`))
	cases := []evalCase{
		// @literal
		{"successor literal protojson type", `{"@literal": {"@type": "type.googleapis.com/T", "path": "$.not.a.path"}}`,
			m{"@type": "type.googleapis.com/T", "path": "$.not.a.path"}, ""},
		{"successor literal-escaped string", `{"@string": {"@literal": "$.age"}}`, "$.age", ""},
		{"successor literal in list", `{"@list": [{"@literal": "$.age"}]}`, l{"$.age"}, ""},
		{"successor literal float", `{"@float": {"@literal": 2.5}}`, 2.5, ""},
		{"successor literal in @int", `{"@int": {"@literal": 1}}`, int64(1), ""},
		{"literal operator key", `{"@literal": {"@len": "$.counts"}}`, m{"@len": "$.counts"}, ""},

		// @nil
		{"successor nil", `{"@nil": null}`, nil, ""},
		{"nil empty map", `{"@nil": {}}`, nil, ""},
		{"successor nil rejects an argument", `{"@nil": {"unexpected": 1}}`, nil, `@nil: takes no argument (null or {}), got map`},

		// @enumerate
		{"successor enumerate", `{"@enumerate": {"@list": ["a", "b"]}}`,
			l{m{"index": int64(0), "value": "a"}, m{"index": int64(1), "value": "b"}}, ""},
		{"successor enumerate defaulted missing list", `{"@enumerate": {"@definedOr": ["$.missing", {"@list": []}]}}`, l{}, ""},
		{"successor enumerate scalar", `{"@enumerate": "scalar"}`, nil, "@enumerate: argument must be a list, got string"},
		{"enumerate null", `{"@enumerate": "$.missing"}`, l{}, ""},

		// @getField
		{"successor getField", `{"@getField": "$.name"}`, "Alice", ""},
		{"getField missing is null", `{"@getField": "$.missing"}`, nil, ""},
		{"successor getField malformed path", `{"@getField": "$.a["}`, nil, "invalid JSONPath"},
		{"getField without root", `{"@getField": "metadata.name"}`, nil, `path "metadata.name" must be a JSONPath rooted at $ (the subject) or $$ (the local subject), e.g. "$.metadata.name"`},
		{"getField computed", `{"@getField": {"@concat": [{"@literal": "$.metadata"}, ".name"]}}`, "web", ""},
		{"getField computed without root", `{"@getField": {"@concat": ["metadata.", "name"]}}`, nil, "must be a JSONPath rooted at $ or $$"},
		{"successor getField subject paths traverse dots", `{"@map": [{"@getField": "$$.x.y"}, [{"x.y": "literal", "x": {"y": "nested"}}, {"x": {"y": "nested"}}]]}`,
			l{"nested", "nested"}, ""},
		{"successor exists bracketed subject key", `{"@filter": [{"@exists": "$$[\"a.b\"]"}, [{"a.b": 1}, {"a": {"b": 2}}]]}`,
			l{m{"a.b": int64(1)}}, ""},

		// @setField
		{"successor setField", `{"@setField": ["$.newField", 42]}`,
			m{"name": "Alice", "age": int64(30), "score": 95.5, "counts": l{int64(3), int64(1), int64(2)},
				"metadata": m{"name": "web", "annotations": m{"a": "1"}}, "newField": int64(42)}, ""},
		{"getField path from a literal", `{"@getField": {"@literal": "$.metadata"}}`, m{"name": "web", "annotations": m{"a": "1"}}, ""},
		{"setField nested", `{"@setField": ["$.metadata.annotations.b", "$.name"]}`,
			m{"name": "Alice", "age": int64(30), "score": 95.5, "counts": l{int64(3), int64(1), int64(2)},
				"metadata": m{"name": "web", "annotations": m{"a": "1", "b": "Alice"}}}, ""},
		{"successor setField subject", `{"@map": [{"@setField": ["$$.seen", true]}, [{"name": "pod-a"}]]}`,
			l{m{"name": "pod-a", "seen": true}}, ""},
		{"setField target not a path", `{"@setField": ["newField", 1]}`, nil, `invalid target "newField"`},
		{"setField target wildcard", `{"@setField": ["$.counts[*]", 1]}`, nil, `invalid target "$.counts[*]"`},
		{"setField target computed", `{"@setField": [{"@concat": ["$.", "a"]}, 1]}`, nil, "the target must be a JSONPath string"},
		{"setField arity", `{"@setField": ["$.a"]}`, nil, "expects a list [target, value], got a list of 1"},
		{"setField local subject not a map", `{"@map": [{"@setField": ["$$.a", 1]}, [1]]}`, nil, "cannot set $$.a: the local subject must be a map, got int"},

		// @lexmin, @lexmax
		{"successor lexmin", `{"@lexmin": ["b", "a", "c"]}`, "a", ""},
		{"successor lexmax", `{"@lexmax": ["b", "a", "c"]}`, "c", ""},
		{"lexmin numbers by their digits", `{"@lexmin": [9, 10]}`, int64(10), ""},
		{"lexmin of a list value", `{"@lexmin": "$.counts"}`, int64(1), ""},
		{"lexmax maps by JSON", `{"@lexmax": [{"b": 1}, {"a": 2}]}`, m{"b": int64(1)}, ""},
		{"lexmin empty", `{"@lexmin": []}`, nil, ""},

		// @sqlbool
		{"successor sqlbool null", `{"@sqlbool": null}`, false, ""},
		{"sqlbool missing", `{"@sqlbool": "$.missing"}`, false, ""},
		{"sqlbool true", `{"@sqlbool": true}`, true, ""},
		{"sqlbool string", `{"@sqlbool": "true"}`, true, ""},
		{"sqlbool number", `{"@sqlbool": 0}`, false, ""},
		{"sqlbool bad string", `{"@sqlbool": "yes"}`, nil, `cannot read the string "yes" as a bool`},
		{"sqlbool list", `{"@sqlbool": [[1]]}`, nil, "argument must be a bool, number, string or null, got list"},
	}
	for _, d := range dialects {
		runDialectCases(t, d, subject, cases)
	}
}

// TestDialectDifferences runs each operator whose meaning differs between
// the dialects in both, with the successor's own test cases where it has
// them.
func TestDialectDifferences(t *testing.T) {
	subject := Normalize(decode(t, `{"metadata": {"name": "frontend"}}`))
	delta := []evalCase{
		{"range n", `{"@range": 4}`, l{int64(0), int64(1), int64(2), int64(3)}, ""},
		{"range negative", `{"@range": -1}`, l{}, ""},
		{"range start end", `{"@range": [2, 5]}`, l{int64(2), int64(3), int64(4)}, ""},
		{"substring start", `{"@substring": ["hello world", 7]}`, "orld", ""},
		{"substring start end", `{"@substring": ["hello world", 1, 5]}`, "ello", ""},
		{"hash", `{"@hash": "test"}`, hashBytes([]byte(`"test"`)), ""},
		{"div", `{"@div": [10, 3]}`, 10.0 / 3, ""},
		{"div even", `{"@div": [10, 2]}`, int64(5), ""},
		{"div floats", `{"@div": [10.5, 2.5]}`, 4.2, ""},
		{"div by zero", `{"@div": [10, 0]}`, nil, "division by zero"},
		{"rnd empty", `{"@rnd": [1, 1]}`, nil, "empty range [1, 1)"},
		{"rnd float", `{"@rnd": [0.5, 1.5]}`, nil, "argument 1 must be an integer"},
		{"sortBy key", `{"@sortBy": ["$$", [3, 1, 2]]}`, l{int64(1), int64(2), int64(3)}, ""},
		{"definedOr", `{"@definedOr": ["$.missing", 42]}`, int64(42), ""},
		{"definedOr three", `{"@definedOr": [null, null, 42]}`, nil,
			`@definedOr: expects 2 arguments, got 3; for a chain of defaults nest the calls: {"@definedOr": [a, {"@definedOr": [b, c]}]}`},
		{"definedOr failing argument", `{"@definedOr": [{"@int": "x"}, 7]}`, nil, `@int`},
		{"noop literal", `{"@noop": {"@len": "$.x"}}`, m{"@len": "$.x"}, ""},
		{"noop null", `{"@noop": null}`, nil, ""},
	}
	successor := []evalCase{
		{"successor range", `{"@range": 5}`, l{int64(1), int64(2), int64(3), int64(4), int64(5)}, ""},
		{"range n", `{"@range": 4}`, l{int64(1), int64(2), int64(3), int64(4)}, ""},
		{"range 0", `{"@range": 0}`, l{}, ""},
		{"range negative", `{"@range": -1}`, nil, "@range: argument must be 0 or more, got -1"},
		{"range start end", `{"@range": [2, 5]}`, l{int64(2), int64(3), int64(4)}, ""},
		{"successor substring start", `{"@substring": ["hello world", 7]}`, "world", ""},
		{"successor substring start length", `{"@substring": ["hello world", 1, 5]}`, "hello", ""},
		{"successor doc substring", `{"@substring": ["$.metadata.name", 1, 3]}`, "fro", ""},
		{"substring from the end", `{"@substring": ["héllo", -3]}`, "llo", ""},
		{"substring start 0", `{"@substring": ["héllo", 0, 2]}`, "hé", ""},
		{"substring clamped", `{"@substring": ["héllo", 4, 100]}`, "lo", ""},
		{"substring negative length", `{"@substring": ["héllo", 2, -1]}`, "", ""},
		{"substring before the start", `{"@substring": ["héllo", -10, 2]}`, "hé", ""},
		{"successor hash", `{"@hash": "test"}`, "4d967a30111bf29f", ""},
		{"hash map", `{"@hash": {"b": [true, null], "a": 1}}`, "1cc69c7fa23616ca", ""},
		{"successor div", `{"@div": [10, 3]}`, int64(3), ""},
		{"div negative truncates", `{"@div": [-7, 2]}`, int64(-3), ""},
		{"successor div floats", `{"@div": [10.5, 2.5]}`, 4.2, ""},
		{"div mixed", `{"@div": [7, 2.0]}`, 3.5, ""},
		{"successor div by zero", `{"@div": [10, 0]}`, nil, "division by zero"},
		{"div overflow", `{"@div": [-9223372036854775808, -1]}`, 9223372036854775808.0, ""},
		{"rnd inclusive", `{"@rnd": [1, 1]}`, int64(1), ""},
		{"rnd empty", `{"@rnd": [2, 1]}`, nil, "empty range [2, 1]"},
		{"successor sortBy comparator", `{"@sortBy": [{"@switch": [[{"@gt": ["$$.a", "$$.b"]}, 1], [{"@eq": ["$$.a", "$$.b"]}, 0], [true, -1]]}, [3, 1, 4, 1, 5, 9]]}`,
			l{int64(1), int64(1), int64(3), int64(4), int64(5), int64(9)}, ""},
		{"successor sortBy nested subject paths", `{"@sortBy": [{"@switch": [
				[{"@lt": ["$$.a.address", "$$.b.address"]}, -1], [{"@gt": ["$$.a.address", "$$.b.address"]}, 1],
				[{"@lt": ["$$.a.port", "$$.b.port"]}, -1], [{"@gt": ["$$.a.port", "$$.b.port"]}, 1], [true, 0]]},
				[{"address": "b", "port": 2}, {"address": "a", "port": 9}, {"address": "b", "port": 1}]]}`,
			l{m{"address": "a", "port": int64(9)}, m{"address": "b", "port": int64(1)}, m{"address": "b", "port": int64(2)}}, ""},
		{"sortBy stable", `{"@sortBy": [{"@cond": [{"@lt": ["$$.a.k", "$$.b.k"]}, -1, {"@cond": [{"@gt": ["$$.a.k", "$$.b.k"]}, 1, 0]}]}, [{"k": 1, "n": "x"}, {"k": 0}, {"k": 1, "n": "y"}]]}`,
			l{m{"k": int64(0)}, m{"k": int64(1), "n": "x"}, m{"k": int64(1), "n": "y"}}, ""},
		{"successor sortBy comparator out of range", `{"@sortBy": [{"@add": ["$$.a", "$$.b"]}, [2, 1]]}`, nil, "the comparator must give -1, 0 or 1, got int 3"},
		{"sortBy key in the successor's dialect", `{"@sortBy": ["$$", [3, 1, 2]]}`, nil, "@sortBy takes a comparator of $$.a and $$.b"},
		{"sortBy one element", `{"@sortBy": ["$$.nope", [1]]}`, l{int64(1)}, ""},
		{"successor definedOr", `{"@definedOr": [null, null, 42]}`, int64(42), ""},
		{"definedOr failing argument", `{"@definedOr": [{"@int": "x"}, 7]}`, int64(7), ""},
		{"definedOr one", `{"@definedOr": "$.metadata.name"}`, "frontend", ""},
		{"definedOr none", `{"@definedOr": [null, "$.missing"]}`, nil, ""},
		{"definedOr over budget", `{"@definedOr": [{"@map": [{"@range": 65536}, {"@range": 65536}]}, 1]}`, nil, "exceeded its budget"},
		{"successor noop", `{"@noop": null}`, nil, ""},
		{"successor noop empty map", `{"@noop": {}}`, nil, ""},
		{"successor noop argument", `{"@noop": {"unexpected": 1}}`, nil, `to write a value literally use {"@literal": value}`},
	}
	for _, d := range []Dialect{"", DialectDeltaController} {
		runDialectCases(t, d, subject, delta)
	}
	runDialectCases(t, DialectDBSP, subject, successor)
}

// TestRndInclusive checks the bounds of @rnd in each dialect over many
// draws: the successor's includes max, Δ-controller's does not.
func TestRndInclusive(t *testing.T) {
	for _, tc := range []struct {
		d       Dialect
		spec    string
		seen    []int64
		notSeen []int64
	}{
		{DialectDeltaController, `{"@rnd": [1, 3]}`, []int64{1, 2}, []int64{3}},
		{DialectDBSP, `{"@rnd": [1, 3]}`, []int64{1, 2, 3}, nil},
		{DialectDBSP, `{"@rnd": [-9223372036854775808, 9223372036854775807]}`, nil, nil},
	} {
		e, err := ParseWith(decode(t, tc.spec), "x", ParseOptions{Dialect: tc.d})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]bool{}
		ctx := &Context{Rand: rand.New(rand.NewPCG(3, 4))}
		for range 300 {
			v, err := Run(e, ctx)
			if err != nil {
				t.Fatal(err)
			}
			got[v.(int64)] = true
		}
		for _, s := range tc.seen {
			if !got[s] {
				t.Errorf("%s %s: never gave %d in 300 draws: %v", tc.d, tc.spec, s, got)
			}
		}
		for _, s := range tc.notSeen {
			if got[s] {
				t.Errorf("%s %s: gave %d", tc.d, tc.spec, s)
			}
		}
	}
	e, err := ParseWith(decode(t, `{"@rnd": [0.5, 1.5]}`), "x", ParseOptions{Dialect: DialectDBSP})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		v, err := Run(e, &Context{})
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := v.(float64); !ok || f < 0.5 || f >= 1.5 {
			t.Fatalf("@rnd [0.5, 1.5] gave %#v", v)
		}
	}
}

// TestDialectNames checks the dialect's names and that Parse is the
// Δ-controller dialect.
func TestDialectNames(t *testing.T) {
	if Dialect("").String() != "deltacontroller" || DialectDBSP.String() != "dbsp" || !DialectDBSP.Successor() || Dialect("").Successor() {
		t.Fatal("dialect names")
	}
	e, err := Parse(decode(t, `{"@range": 2}`), "x")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Eval(e, nil); !reflect.DeepEqual(v, l{int64(0), int64(1)}) {
		t.Fatalf("Parse: @range 2 = %#v", v)
	}
}
