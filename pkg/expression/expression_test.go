package expression

import (
	"crypto/md5"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

const podJSON = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {
    "name": "my-pod",
    "namespace": "default",
    "labels": {"app": "web", "tier": "frontend"},
    "annotations": {"a.b/c": "x"}
  },
  "spec": {
    "replicas": 3,
    "nodeName": null,
    "containers": [
      {"name": "container-1", "image": "my-container-1:latest", "ports": [{"containerPort": 80}, {"containerPort": 443}]},
      {"name": "container-2", "image": "my-container-2:latest", "ports": []},
      {"name": "container-3", "image": "my-container-3:v1"}
    ]
  },
  "status": {"phase": "Running", "ready": true, "ratio": 0.5, "counts": [3, 1, 2]}
}`

// decode decodes JSON with integers as json.Number, as a spec loader would
// with UseNumber.
func decode(t testing.TB, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

func pod(t testing.TB) any { return Normalize(decode(t, podJSON)) }

type evalCase struct {
	name string
	spec string // JSON
	want any    // compared with reflect.DeepEqual (types matter)
	err  string // substring of the error; empty means success
}

func runCases(t *testing.T, cases []evalCase) {
	t.Helper()
	runCasesOn(t, pod(t), cases)
}

// runCasesOn runs the cases on subject.
func runCasesOn(t *testing.T, subject any, cases []evalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse(decode(t, tc.spec), "spec.x")
			var got any
			if err == nil {
				got, err = e.Eval(&Context{Subject: subject})
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

type m = map[string]any
type l = []any

func TestSeedExample(t *testing.T) {
	spec := decode(t, `{
	  "metadata": {
	    "name": "$.metadata.name",
	    "namespace": "$.metadata.namespace",
	    "annotations": {"dcontroller.io/container-num": {"@string": {"@len": ["$.spec.containers"]}}}
	  }
	}`)
	e, err := Parse(spec, `spec.controllers[0].pipeline["@project"]`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Eval(e, pod(t))
	if err != nil {
		t.Fatal(err)
	}
	want := m{"metadata": m{"name": "my-pod", "namespace": "default",
		"annotations": m{"dcontroller.io/container-num": "3"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestLiteralsAndQueries(t *testing.T) {
	runCases(t, []evalCase{
		{"null", `null`, nil, ""},
		{"bool", `true`, true, ""},
		{"int", `42`, int64(42), ""},
		{"float", `4.5`, 4.5, ""},
		{"string", `"hello"`, "hello", ""},
		{"at string literal", `"@nowhere"`, "@nowhere", ""},
		{"list", `[1, "a", null]`, l{int64(1), "a", nil}, ""},
		{"map", `{"a": {"b": [1]}}`, m{"a": m{"b": l{int64(1)}}}, ""},
		{"map with queries", `{"n": "$.metadata.name", "k": ["$.kind", 1]}`, m{"n": "my-pod", "k": l{"Pod", int64(1)}}, ""},
		{"root", `"$.kind"`, "Pod", ""},
		{"nested", `"$.metadata.labels.app"`, "web", ""},
		{"bracket name", `"$.metadata.annotations['a.b/c']"`, "x", ""},
		{"index", `"$.spec.containers[1].name"`, "container-2", ""},
		{"negative index", `"$.spec.containers[-1].name"`, "container-3", ""},
		{"missing", `"$.spec.nope.deeper"`, nil, ""},
		{"index out of range", `"$.spec.containers[7]"`, nil, ""},
		{"explicit null", `"$.spec.nodeName"`, nil, ""},
		{"wildcard", `"$.spec.containers[*].name"`, l{"container-1", "container-2", "container-3"}, ""},
		{"wildcard empty", `"$.spec.nope[*]"`, l{}, ""},
		{"slice", `"$.status.counts[0:2]"`, l{int64(3), int64(1)}, ""},
		{"filter yields the first match", `"$.spec.containers[?@.image == 'my-container-3:v1'].name"`, "container-3", ""},
		{"descendant", `"$..containerPort"`, l{int64(80), int64(443)}, ""},
		{"whole subject", `{"@len": "$"}`, int64(5), ""},
		{"whole subject dot", `{"@eq": ["$.", "$"]}`, true, ""},
		{"whole subject dot count", `{"@len": "$."}`, int64(5), ""},
		{"whole local subject dot", `{"@map": ["$$.", [1, "a"]]}`, l{int64(1), "a"}, ""},
		{"whole local subject dot member", `{"@map": [{"@len": "$$."}, [{"a": 1, "b": 2}]]}`, l{int64(2)}, ""},
		{"local outside list op is null", `"$$.name"`, nil, ""},
		{"invalid jsonpath", `"$.foo["`, nil, `spec.x: invalid JSONPath "$.foo["`},
		{"invalid jsonpath nested", `{"a": ["$$$"]}`, nil, `spec.x.a[0]: invalid JSONPath "$$$"`},
		{"dollar words are paths", `"$5"`, nil, `invalid JSONPath`},
		{"operator with other keys", `{"@len": [], "x": 1}`, nil, `spec.x: operator "@len" must be the only key`},
		{"unknown operator", `{"a": {"@frobnicate": 1}}`, nil, `spec.x.a: unknown operator "@frobnicate"`},
		{"unknown operator of earlier releases says what to write", `{"@merge": {"a": 1}}`, nil, `spec.x: unknown operator "@merge"; to merge maps into one result in order, use the list form of @project: "@project": [map, map, ...]`},
	})
}

func TestSetterKeys(t *testing.T) {
	runCases(t, []evalCase{
		{"annotation", `{"metadata": {"name": "$.metadata.name"}, "$.metadata.annotations.a": "x"}`,
			m{"metadata": m{"name": "my-pod", "annotations": m{"a": "x"}}}, ""},
		{"bracket key", `{"$.metadata.annotations['dcontroller.io/n']": {"@len": "$.spec.containers"}}`,
			m{"metadata": m{"annotations": m{"dcontroller.io/n": int64(3)}}}, ""},
		{"sorted application", `{"$.a": {"x": 1}, "$.a.y": 2}`, m{"a": m{"x": int64(1), "y": int64(2)}}, ""},
		{"into copied subject map", `{"metadata": "$.metadata", "$.metadata.labels.new": "v"}`,
			m{"metadata": m{"name": "my-pod", "namespace": "default",
				"labels":      m{"app": "web", "tier": "frontend", "new": "v"},
				"annotations": m{"a.b/c": "x"}}}, ""},
		{"index", `{"l": [1, 2], "$.l[1]": 5}`, m{"l": l{int64(1), int64(5)}}, ""},
		{"append", `{"l": [1], "$.l[1]": 5}`, m{"l": l{int64(1), int64(5)}}, ""},
		{"past the end pads with nulls", `{"l": [1], "$.l[3]": 5}`, m{"l": l{int64(1), nil, nil, int64(5)}}, ""},
		{"padding into a missing list", `{"$.y[3]": 12}`, m{"y": l{nil, nil, nil, int64(12)}}, ""},
		{"padding then a member", `{"$.y[1].name": "b"}`, m{"y": l{nil, m{"name": "b"}}}, ""},
		{"negative out of range", `{"l": [1], "$.l[-3]": 5}`, nil, `spec.x["$.l[-3]"]: cannot set $.l[-3]: index -3 out of range`},
		{"index too large", `{"$.l[65536]": 5}`, nil, `index 65536 exceeds the largest settable index 65535`},
		{"root setter", `{"$.": "$.metadata.labels"}`, m{"app": "web", "tier": "frontend"}, ""},
		{"root setter then setters and plain keys", `{"$.": "$.metadata.labels", "$.tier": "backend", "kind": "$.kind"}`,
			m{"app": "web", "tier": "backend", "kind": "Pod"}, ""},
		{"root setter of a literal map", `{"$.": {"a": 1}}`, m{"a": int64(1)}, ""},
		{"root setter of a non-map", `{"$.": "$.kind"}`, nil, `spec.x["$."]: cannot set $.: the value must be a map, got string`},
		{"root setter of null", `{"$.": "$.nope"}`, nil, `cannot set $.: the value must be a map, got null`},
		{"bare root setter", `{"$": 1}`, nil, `invalid setter "$": must start with a member name ("$." sets the whole object)`},
		{"not a map", `{"a": 1, "$.a.b": 2}`, nil, `cannot set $.a.b: $["a"] is of type int, not a map`},
		{"non-singular", `{"$.a[*]": 1}`, nil, `only name and index segments`},
		{"local root", `{"$$.a": 1}`, nil, `cannot set into the local subject`},
	})
	// The subject must not be modified by a setter.
	subject := pod(t)
	e, err := Parse(decode(t, `{"metadata": "$.metadata", "$.metadata.labels.new": "v"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(&Context{Subject: subject}); err != nil {
		t.Fatal(err)
	}
	if _, ok := subject.(m)["metadata"].(m)["labels"].(m)["new"]; ok {
		t.Fatal("setter modified the subject")
	}
}

// conditionsJSON is a subject with Kubernetes status conditions, as the
// filter queries in Δ-controller and kubectl manifests read them.
const conditionsJSON = `{
  "metadata": {"name": "web"},
  "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}, {"name": "c", "image": "x"}]},
  "status": {"conditions": [
    {"type": "Available", "status": "False", "reason": "Down"},
    {"type": "Ready", "status": "True", "reason": "Up"},
    {"type": "Ready", "status": "False", "reason": "Stale"}
  ]}
}`

// TestFilterQueries: a query whose only non-singular selectors are filters
// yields the first selected value or null (Δ-controller); wildcards, slices,
// unions and descendant segments keep yielding the list; `in` tests
// membership in a literal list.
func TestFilterQueries(t *testing.T) {
	subject := Normalize(decode(t, conditionsJSON))
	cases := []evalCase{
		{"kubectl spelling", `"$.status.conditions[?(@.type=='Ready')].status"`, "True", ""},
		{"compared", `{"@eq": ["$.status.conditions[?(@.type=='Ready')].status", "True"]}`, true, ""},
		{"RFC spelling", `"$.status.conditions[?@.type == 'Ready'].reason"`, "Up", ""},
		{"double quotes", `"$.status.conditions[?(@.type==\"Available\")].reason"`, "Down", ""},
		{"whole element", `"$.status.conditions[?(@.type=='Available')]"`, m{"type": "Available", "status": "False", "reason": "Down"}, ""},
		{"no match is null", `"$.status.conditions[?(@.type=='Missing')].status"`, nil, ""},
		{"no match compared", `{"@eq": ["$.status.conditions[?(@.type=='Missing')].status", null]}`, true, ""},
		{"filter then index", `"$.spec[?@ != null][0].name"`, "a", ""},
		{"two filters", `"$.status[?(@[0].type=='Available')][?(@.reason=='Stale')].type"`, "Ready", ""},
		{"local subject", `{"@map": ["$$.conditions[?(@.status=='True')].type", ["$.status"]]}`, l{"Ready"}, ""},
		{"exists", `{"@exists": "$.status.conditions[?(@.type=='Ready')]"}`, true, ""},
		{"exists no match", `{"@exists": "$.status.conditions[?(@.type=='Missing')]"}`, false, ""},
		{"wildcard keeps the list", `"$.spec.containers[*].name"`, l{"a", "b", "c"}, ""},
		{"slice keeps the list", `"$.spec.containers[0:2].name"`, l{"a", "b"}, ""},
		{"union keeps the list", `"$.spec.containers[0,2].name"`, l{"a", "c"}, ""},
		{"descendant keeps the list", `"$..conditions[?(@.type=='Ready')].reason"`, l{"Up", "Stale"}, ""},
		{"wildcard and filter keeps the list", `"$.spec.containers[*][?@ == 'x']"`, l{"x", "x"}, ""},
		{"in", `"$.spec.containers[?(@.name in ['b','c'])].name"`, "b", ""},
		{"in one element", `"$.spec.containers[?(@.name in ['c'])].name"`, "c", ""},
		{"in no match", `"$.spec.containers[?(@.name in ['z'])].name"`, nil, ""},
		{"in empty list", `"$.spec.containers[?(@.name in [])].name"`, nil, ""},
		{"in with wildcard", `"$.spec.containers[?@.name in [\"a\", \"c\"]].image"`, "x", ""},
		{"in all matches", `"$.spec.containers[*][?@ in ['x','y']]"`, l{"x", "y", "x"}, ""},
		{"in combined", `"$.status.conditions[?(@.type in ['Ready', 'Available'] && @.status == 'False')].reason"`, "Down", ""},
		{"in after or", `"$.status.conditions[?(@.type == 'Nope' || @.reason in ['Stale'])].status"`, "False", ""},
		{"in negated", `"$.status.conditions[?!(@.type in ['Available'])].reason"`, "Up", ""},
		{"in bracket operand", `"$.status.conditions[?@['reason'] in ['Up']].type"`, "Ready", ""},
		{"in numbers", `{"@map": ["$$[?@ in [2, 3.5]]", [[1, 2, 3]]]}`, l{int64(2)}, ""},
		{"in string with brackets and commas", `"$.status.conditions[?@.reason in ['a, ]b', 'Up']].type"`, "Ready", ""},
		{"member named in", `"$.status.conditions[?!@.in].type"`, "Available", ""},
		{"member named in compared", `{"@map": ["$$[?@.in == 'in'][\"in\"]", [[{"in": "x"}, {"in": "in"}]]]}`, l{"in"}, ""},
		{"in needs a list", `"$.spec.containers[?(@.name in 'a')]"`, nil, `spec.x: invalid JSONPath "$.spec.containers[?(@.name in 'a')]": the right-hand side of "in" must be a list literal`},
		{"in needs literals", `"$.spec.containers[?(@.name in [@.image])]"`, nil, `the list right of "in" must hold literals`},
		{"in unterminated", `"$.spec.containers[?(@.name in ['a'"`, nil, `unterminated list right of "in"`},
		{"in empty element", `"$.spec.containers[?(@.name in ['a',,'b'])]"`, nil, `empty element in the list right of "in"`},
		{"in without operand", `"$.spec.containers[?in ['a']]"`, nil, `"in" needs a left-hand operand`},
	}
	runCasesOn(t, subject, cases)
	q, err := ParseQuery("$.status.conditions[?(@.type=='Ready')].status")
	if err != nil {
		t.Fatal(err)
	}
	if q.Singular() || !q.First() || q.Segments() != nil {
		t.Fatalf("filter query: Singular %v First %v Segments %v", q.Singular(), q.First(), q.Segments())
	}
	if v, ok := q.Get(subject); !ok || v != "True" {
		t.Fatalf("Get = %v %v", v, ok)
	}
	if v, ok := q.Get(m{}); ok || v != nil {
		t.Fatalf("Get on no match = %v %v", v, ok)
	}
	if got := q.Select(subject); !reflect.DeepEqual(got, l{"True", "False"}) {
		t.Fatalf("Select = %#v", got)
	}
}

// TestRootSetter: ParseSetter("$.") replaces the content of the object it
// is given (Δ-controller's root setter), without sharing or losing members
// when the value is the object itself.
func TestRootSetter(t *testing.T) {
	s, err := ParseSetter("$.")
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "$." {
		t.Fatalf("String() = %q", s.String())
	}
	obj := m{"old": 1, "keep": "no"}
	if err := s.Set(obj, m{"a": int64(1), "b": m{"c": "d"}}); err != nil {
		t.Fatal(err)
	}
	if want := (m{"a": int64(1), "b": m{"c": "d"}}); !reflect.DeepEqual(obj, want) {
		t.Fatalf("got %#v, want %#v", obj, want)
	}
	if err := s.Set(obj, obj); err != nil {
		t.Fatal(err)
	}
	if want := (m{"a": int64(1), "b": m{"c": "d"}}); !reflect.DeepEqual(obj, want) {
		t.Fatalf("set to itself: got %#v, want %#v", obj, want)
	}
	for _, bad := range []any{"x", l{int64(1)}, nil, int64(3)} {
		err := s.Set(obj, bad)
		var ee *Error
		if err == nil || !errors.As(err, &ee) || !strings.Contains(err.Error(), "the value must be a map") {
			t.Fatalf("Set(%#v) = %v, want an *Error about a map", bad, err)
		}
	}
	if want := (m{"a": int64(1), "b": m{"c": "d"}}); !reflect.DeepEqual(obj, want) {
		t.Fatalf("failed set changed the object: %#v", obj)
	}
	if _, err := ParseSetter("$$."); err == nil {
		t.Fatal(`ParseSetter("$$.") accepted`)
	}
}

func TestLogic(t *testing.T) {
	runCases(t, []evalCase{
		{"and true", `{"@and": [true, "$.status.ready"]}`, true, ""},
		{"and false", `{"@and": [true, false]}`, false, ""},
		{"and empty", `{"@and": []}`, true, ""},
		{"and null is false", `{"@and": [true, "$.nope"]}`, false, ""},
		{"and short-circuits", `{"@and": [false, {"@div": [1, 0]}]}`, false, ""},
		{"and type error", `{"@and": [true, 1]}`, nil, `spec.x["@and"]: @and: argument 2 must be a bool, got int`},
		{"and spread", `{"@and": {"@list": [true, true]}}`, true, ""},
		{"and single list operand", `{"@and": [[true, false]]}`, false, ""},
		{"and spread non-list", `{"@and": "$.kind"}`, nil, `@and: argument must be a list, got string`},
		{"or true", `{"@or": [false, true]}`, true, ""},
		{"or false", `{"@or": [false, null]}`, false, ""},
		{"or empty", `{"@or": []}`, false, ""},
		{"or short-circuits", `{"@or": [true, {"@div": [1, 0]}]}`, true, ""},
		{"or type error", `{"@or": ["x"]}`, nil, `@or: operand must be a bool, got string`},
		{"not", `{"@not": true}`, false, ""},
		{"not wrapped", `{"@not": [false]}`, true, ""},
		{"not null", `{"@not": "$.nope"}`, true, ""},
		{"not type error", `{"@not": "x"}`, nil, `@not: argument must be a bool, got string`},
		{"cond then", `{"@cond": [true, "a", {"@div": [1, 0]}]}`, "a", ""},
		{"cond else", `{"@cond": [{"@eq": ["$.kind", "Service"]}, "a", "b"]}`, "b", ""},
		{"cond type error", `{"@cond": [1, "a", "b"]}`, nil, `@cond: condition must be a bool, got int`},
		{"cond without else true", `{"@cond": [true, "a"]}`, "a", ""},
		{"cond without else false", `{"@cond": [false, {"@div": [1, 0]}]}`, nil, ""},
		{"cond arity", `{"@cond": [true]}`, nil, `spec.x["@cond"]: @cond: expects 2 to 3 arguments, got 1`},
		{"cond not list", `{"@cond": true}`, nil, `@cond: expects a list of 2 to 3 arguments, got bool`},
		{"switch first", `{"@switch": [[false, 1], [true, 2], [true, 3]]}`, int64(2), ""},
		{"switch none", `{"@switch": [[false, 1]]}`, nil, ""},
		{"switch lazy", `{"@switch": [[true, 1], [true, {"@div": [1, 0]}]]}`, int64(1), ""},
		{"switch bad case", `{"@switch": [[true]]}`, nil, `spec.x["@switch"][0]: @switch: case must be a [case, value] pair`},
		{"switch not list", `{"@switch": 1}`, nil, `@switch: expects a list of [case, value] pairs`},
		{"switch case type", `{"@switch": [["x", 1]]}`, nil, `@switch: case 1 must be a bool, got string`},
		{"definedOr defined", `{"@definedOr": ["$.kind", "dflt"]}`, "Pod", ""},
		{"definedOr missing", `{"@definedOr": ["$.nope", "dflt"]}`, "dflt", ""},
		{"definedOr false is defined", `{"@definedOr": [false, true]}`, false, ""},
		{"definedOr lazy", `{"@definedOr": [1, {"@div": [1, 0]}]}`, int64(1), ""},
		{"noop path", `{"@noop": "$.kind"}`, "$.kind", ""},
		{"noop operator", `{"@noop": {"@len": 1}}`, m{"@len": int64(1)}, ""},
		{"noop list", `{"@noop": ["$.a"]}`, l{"$.a"}, ""},
	})
}

func TestComparison(t *testing.T) {
	runCases(t, []evalCase{
		{"eq strings", `{"@eq": ["$.kind", "Pod"]}`, true, ""},
		{"eq int float", `{"@eq": [1, 1.0]}`, true, ""},
		{"eq deep", `{"@eq": [{"a": [1, {"b": 2}]}, {"a": [1.0, {"b": 2}]}]}`, true, ""},
		{"eq deep differs", `{"@eq": [{"a": [1]}, {"a": [1, 2]}]}`, false, ""},
		{"eq mixed types", `{"@eq": ["1", 1]}`, false, ""},
		{"eq nulls", `{"@eq": [null, "$.nope"]}`, true, ""},
		{"eq arity", `{"@eq": [1]}`, nil, `@eq: expects 2 arguments, got 1`},
		{"neq", `{"@neq": ["$.kind", "Pod"]}`, false, ""},
		{"neq true", `{"@neq": [1, 2]}`, true, ""},
		{"gt", `{"@gt": ["$.spec.replicas", 2]}`, true, ""},
		{"gt float", `{"@gt": [2.5, 3]}`, false, ""},
		{"gte equal", `{"@gte": [3, 3.0]}`, true, ""},
		{"lt strings", `{"@lt": ["abc", "abd"]}`, true, ""},
		{"lte", `{"@lte": [4, 3]}`, false, ""},
		{"large int vs float", `{"@lt": [9007199254740993, 9007199254740992.0]}`, false, ""},
		{"mixed type error", `{"@gt": ["1", 1]}`, nil, `spec.x["@gt"]: @gt: cannot compare string and int`},
		{"null type error", `{"@lt": [null, 1]}`, nil, `@lt: cannot compare null and int`},
		{"bool type error", `{"@gte": [true, false]}`, nil, `cannot compare bool and bool`},
	})
}

func TestArithmetic(t *testing.T) {
	runCases(t, []evalCase{
		{"add ints", `{"@add": [1, 2, 3]}`, int64(6), ""},
		{"add float", `{"@add": [1, 0.5]}`, 1.5, ""},
		{"add empty", `{"@add": []}`, int64(0), ""},
		{"add spread", `{"@add": "$.status.counts"}`, int64(6), ""},
		{"add single list", `{"@add": [[1, 2]]}`, int64(3), ""},
		{"add path", `{"@add": ["$.spec.replicas", 1]}`, int64(4), ""},
		{"add overflow to float", `{"@add": [9223372036854775807, 1]}`, 9223372036854775808.0, ""},
		{"add type error", `{"@add": [1, "2"]}`, nil, `@add: operand 2 must be a number, got string`},
		{"sub", `{"@sub": [5, 7]}`, int64(-2), ""},
		{"sub float", `{"@sub": [5, 0.5]}`, 4.5, ""},
		{"sub arity", `{"@sub": [5]}`, nil, `@sub: expects 2 arguments, got 1`},
		{"sub type", `{"@sub": [5, null]}`, nil, `@sub: argument 2 must be a number, got null`},
		{"mul", `{"@mul": [2, 3, 4]}`, int64(24), ""},
		{"mul float", `{"@mul": [2, 1.5]}`, 3.0, ""},
		{"mul empty", `{"@mul": []}`, int64(1), ""},
		{"mul overflow", `{"@mul": [4611686018427387904, 4]}`, 1.8446744073709552e19, ""},
		{"div exact", `{"@div": [6, 3]}`, int64(2), ""},
		{"div inexact", `{"@div": [7, 2]}`, 3.5, ""},
		{"div float", `{"@div": [6.0, 3]}`, 2.0, ""},
		{"div negative", `{"@div": [-6, 4]}`, -1.5, ""},
		{"div by zero", `{"@div": [1, 0]}`, nil, `spec.x["@div"]: @div: division by zero`},
		{"div by float zero", `{"@div": [1, 0.0]}`, nil, `division by zero`},
		{"div minint", `{"@div": [-9223372036854775808, -1]}`, 9223372036854775808.0, ""},
		{"mod", `{"@mod": [7, 3]}`, int64(1), ""},
		{"mod negative", `{"@mod": [-7, 3]}`, int64(-1), ""},
		{"mod float", `{"@mod": [7.5, 2]}`, 1.5, ""},
		{"mod by zero", `{"@mod": [7, 0]}`, nil, `@mod: modulo by zero`},
		{"mod minint", `{"@mod": [-9223372036854775808, -1]}`, int64(0), ""},
		{"neg", `{"@neg": 3}`, int64(-3), ""},
		{"neg float", `{"@neg": [-2.5]}`, 2.5, ""},
		{"neg minint", `{"@neg": -9223372036854775808}`, 9223372036854775808.0, ""},
		{"neg type", `{"@neg": "3"}`, nil, `@neg: argument must be a number, got string`},
		{"abs", `{"@abs": -3}`, int64(3), ""},
		{"abs float", `{"@abs": -3.5}`, 3.5, ""},
		{"floor", `{"@floor": 2.7}`, int64(2), ""},
		{"floor negative", `{"@floor": -2.2}`, int64(-3), ""},
		{"floor int", `{"@floor": 5}`, int64(5), ""},
		{"floor huge", `{"@floor": 1e300}`, nil, `@floor: 1e+300 is out of the integer range`},
		{"ceil", `{"@ceil": 2.1}`, int64(3), ""},
		{"ceil negative", `{"@ceil": -2.7}`, int64(-2), ""},
		{"ceil type", `{"@ceil": true}`, nil, `@ceil: argument must be a number, got bool`},
	})
}

func TestListOperators(t *testing.T) {
	runCases(t, []evalCase{
		{"map", `{"@map": ["$$.name", "$.spec.containers"]}`, l{"container-1", "container-2", "container-3"}, ""},
		{"map sees global", `{"@map": [{"@concat": ["$.metadata.name", "/", "$$"]}, ["a", "b"]]}`, l{"my-pod/a", "my-pod/b"}, ""},
		{"map null list", `{"@map": ["$$", "$.nope"]}`, l{}, ""},
		{"map nested local", `{"@map": [{"@map": [{"@mul": ["$$", 10]}, "$$"]}, [[1, 2], [3]]]}`, l{l{int64(10), int64(20)}, l{int64(30)}}, ""},
		{"map not list", `{"@map": ["$$", "$.kind"]}`, nil, `@map: argument 2 must be a list, got string`},
		{"map arity", `{"@map": ["$$"]}`, nil, `@map: expects 2 arguments, got 1`},
		{"filter", `{"@filter": [{"@gt": ["$$", 1]}, "$.status.counts"]}`, l{int64(3), int64(2)}, ""},
		{"filter objects", `{"@filter": [{"@exists": "$$.ports"}, "$.spec.containers"]}`,
			[]any{m{"name": "container-1", "image": "my-container-1:latest", "ports": l{m{"containerPort": int64(80)}, m{"containerPort": int64(443)}}},
				m{"name": "container-2", "image": "my-container-2:latest", "ports": l{}}}, ""},
		{"filter type", `{"@filter": ["$$", [1]]}`, nil, `@filter: condition must be a bool, got int`},
		{"fold sum", `{"@fold": [{"@add": ["$$.acc", "$$.item"]}, 0, "$.status.counts"]}`, int64(6), ""},
		{"fold concat", `{"@fold": [{"@concat": ["$$.acc", "$$.item.name", ","]}, "", "$.spec.containers"]}`, "container-1,container-2,container-3,", ""},
		{"fold empty", `{"@fold": [{"@add": ["$$.acc", 1]}, 7, []]}`, int64(7), ""},
		{"fold arity", `{"@fold": ["$$", 0]}`, nil, `@fold: expects 3 arguments, got 2`},
		{"sum", `{"@sum": "$.status.counts"}`, int64(6), ""},
		{"sum wrapped", `{"@sum": [[1, 2.5]]}`, 3.5, ""},
		{"sum bare list", `{"@sum": [1, 2, 3]}`, int64(6), ""},
		{"sum empty", `{"@sum": []}`, int64(0), ""},
		{"sum type", `{"@sum": "$.kind"}`, nil, `@sum: argument must be a list, got string`},
		{"len wrapped", `{"@len": ["$.spec.containers"]}`, int64(3), ""},
		{"len bare", `{"@len": "$.spec.containers"}`, int64(3), ""},
		{"len literal list", `{"@len": [1, 2, 3]}`, int64(3), ""},
		{"len empty list", `{"@len": []}`, int64(0), ""},
		{"len string runes", `{"@len": "héllo"}`, int64(5), ""},
		{"len map", `{"@len": "$.metadata.labels"}`, int64(2), ""},
		{"len null", `{"@len": "$.nope"}`, int64(0), ""},
		{"len type", `{"@len": true}`, nil, `spec.x["@len"]: @len: argument must be a list, string or map, got bool`},
		{"min", `{"@min": [3, 1.5, 2]}`, 1.5, ""},
		{"min list", `{"@min": "$.status.counts"}`, int64(1), ""},
		{"min single list", `{"@min": [[5, 4]]}`, int64(4), ""},
		{"min strings", `{"@min": ["b", "a"]}`, "a", ""},
		{"min empty", `{"@min": []}`, nil, ""},
		{"min mixed", `{"@min": [1, "a"]}`, nil, `@min: cannot compare string and int`},
		{"min single bool", `{"@min": [true]}`, nil, `@min: cannot compare bool and bool`},
		{"max", `{"@max": [3, 1, 2]}`, int64(3), ""},
		{"max mixed numbers", `{"@max": [3, 3.5]}`, 3.5, ""},
		{"in", `{"@in": ["web", ["db", "web"]]}`, true, ""},
		{"in numbers by value", `{"@in": [1.0, "$.status.counts"]}`, true, ""},
		{"in absent", `{"@in": [7, "$.status.counts"]}`, false, ""},
		{"in map keys", `{"@in": ["app", "$.metadata.labels"]}`, true, ""},
		{"in null", `{"@in": [1, null]}`, false, ""},
		{"in type", `{"@in": [1, "abc"]}`, nil, `@in: argument 2 must be a list or map, got string`},
		{"range n", `{"@range": 3}`, l{int64(0), int64(1), int64(2)}, ""},
		{"range wrapped", `{"@range": [2]}`, l{int64(0), int64(1)}, ""},
		{"range start end", `{"@range": [2, 5]}`, l{int64(2), int64(3), int64(4)}, ""},
		{"range empty", `{"@range": [5, 2]}`, l{}, ""},
		{"range float integral", `{"@range": 2.0}`, l{int64(0), int64(1)}, ""},
		{"range float", `{"@range": 2.5}`, nil, `@range: argument must be an integer, got float 2.5`},
		{"range arity", `{"@range": [1, 2, 3]}`, nil, `@range: expects 1 to 2 arguments, got 3`},
		{"range too large", `{"@range": 100000000000}`, nil, `@range: range of more than`},
		{"any cond", `{"@any": [{"@eq": ["$$.name", "container-2"]}, "$.spec.containers"]}`, true, ""},
		{"any cond none", `{"@any": [{"@eq": ["$$", 9]}, "$.status.counts"]}`, false, ""},
		{"any bools", `{"@any": {"@list": [false, true]}}`, true, ""},
		{"any wrapped bools", `{"@any": [[false, false]]}`, false, ""},
		{"any empty", `{"@any": [[]]}`, false, ""},
		{"any type", `{"@any": [["x"]]}`, nil, `@any: element must be a bool, got string`},
		{"all cond", `{"@all": [{"@gt": ["$$", 0]}, "$.status.counts"]}`, true, ""},
		{"all cond false", `{"@all": [{"@gt": ["$$", 1]}, "$.status.counts"]}`, false, ""},
		{"all empty", `{"@all": [[]]}`, true, ""},
		{"all null list", `{"@all": "$.nope"}`, true, ""},
		{"none cond", `{"@none": [{"@gt": ["$$", 5]}, "$.status.counts"]}`, true, ""},
		{"none bools", `{"@none": [[false, true]]}`, false, ""},
		{"none list type", `{"@none": ["$$", "$.kind"]}`, nil, `@none: argument 2 must be a list, got string`},
		{"sortBy", `{"@sortBy": ["$$", "$.status.counts"]}`, l{int64(1), int64(2), int64(3)}, ""},
		{"sortBy key", `{"@sortBy": [{"@neg": "$$.n"}, [{"n": 1}, {"n": 3}, {"n": 2}]]}`, l{m{"n": int64(3)}, m{"n": int64(2)}, m{"n": int64(1)}}, ""},
		{"sortBy stable", `{"@sortBy": ["$$.k", [{"k": 1, "i": 0}, {"k": 0, "i": 1}, {"k": 1, "i": 2}, {"k": 0, "i": 3}]]}`,
			l{m{"k": int64(0), "i": int64(1)}, m{"k": int64(0), "i": int64(3)}, m{"k": int64(1), "i": int64(0)}, m{"k": int64(1), "i": int64(2)}}, ""},
		{"sortBy strings", `{"@map": ["$$.name", {"@sortBy": [{"@concat": ["$$.image", "$$.name"]}, [{"name": "b", "image": "x"}, {"name": "a", "image": "y"}, {"name": "c", "image": "x"}]]}]}`, l{"b", "c", "a"}, ""},
		{"sortBy mixed", `{"@sortBy": ["$$", [1, "a"]]}`, nil, `@sortBy: sort key: cannot compare`},
		{"sortBy single null key", `{"@sortBy": ["$$.x", [1]]}`, nil, `@sortBy: sort key: cannot compare null and null`},
		{"list", `{"@list": ["$.kind", 1, [2]]}`, l{"Pod", int64(1), l{int64(2)}}, ""},
		{"list keeps single list", `{"@list": [[1, 2]]}`, l{l{int64(1), int64(2)}}, ""},
		{"list spread", `{"@list": "$.status.counts"}`, l{int64(3), int64(1), int64(2)}, ""},
		{"dict pairs", `{"@dict": [["a", 1], ["b", "$.kind"]]}`, m{"a": int64(1), "b": "Pod"}, ""},
		{"dict one pair", `{"@dict": [["a", 1]]}`, m{"a": int64(1)}, ""},
		{"dict later wins", `{"@dict": [["a", 1], ["a", 2]]}`, m{"a": int64(2)}, ""},
		{"dict map", `{"@dict": "$.metadata.labels"}`, m{"app": "web", "tier": "frontend"}, ""},
		{"dict wrapped expr", `{"@dict": [{"@map": [["$$.name", "$$.image"], "$.spec.containers"]}]}`,
			m{"container-1": "my-container-1:latest", "container-2": "my-container-2:latest", "container-3": "my-container-3:v1"}, ""},
		{"dict bad pair", `{"@dict": [["a"]]}`, nil, `@dict: element 1 must be a [key, value] pair, got list`},
		{"dict bad key", `{"@dict": [[1, 2]]}`, nil, `@dict: element 1: key must be a string, got int`},
		{"dict type", `{"@dict": 5}`, nil, `@dict: argument must be a list of [key, value] pairs or a map, got int`},
	})
}

func TestStringOperators(t *testing.T) {
	runCases(t, []evalCase{
		{"concat", `{"@concat": ["$.metadata.namespace", "/", "$.metadata.name"]}`, "default/my-pod", ""},
		{"concat converts", `{"@concat": ["n=", 3, " f=", 0.5, " b=", true, " z=", null, " l=", [1, "a"]]}`, `n=3 f=0.5 b=true z= l=[1,"a"]`, ""},
		{"concat spread", `{"@concat": {"@map": ["$$.name", "$.spec.containers"]}}`, "container-1container-2container-3", ""},
		{"concat empty", `{"@concat": []}`, "", ""},
		{"split", `{"@split": ["a,b,,c", ","]}`, l{"a", "b", "", "c"}, ""},
		{"split image", `{"@split": ["$.spec.containers[0].image", ":"]}`, l{"my-container-1", "latest"}, ""},
		{"split type", `{"@split": ["a", 1]}`, nil, `@split: argument 2 must be a string, got int`},
		{"join", `{"@join": [["a", "b", 3], "-"]}`, "a-b-3", ""},
		{"join empty", `{"@join": [[], "-"]}`, "", ""},
		{"join type", `{"@join": ["ab", "-"]}`, nil, `@join: argument 1 must be a list, got string`},
		{"upper", `{"@upper": "$.kind"}`, "POD", ""},
		{"lower", `{"@lower": ["ÄB"]}`, "äb", ""},
		{"trim", `{"@trim": "  x y \n"}`, "x y", ""},
		{"upper type", `{"@upper": 1}`, nil, `@upper: argument must be a string, got int`},
		{"replace", `{"@replace": ["a-b-c", "-", "+"]}`, "a+b+c", ""},
		{"replace none", `{"@replace": ["abc", "x", "y"]}`, "abc", ""},
		{"replace type", `{"@replace": ["abc", "x", 1]}`, nil, `@replace: argument 3 must be a string, got int`},
		{"replace arity", `{"@replace": ["abc", "x"]}`, nil, `@replace: expects 3 arguments, got 2`},
		{"substring start", `{"@substring": ["hello", 2]}`, "llo", ""},
		{"substring range", `{"@substring": ["hello", 1, 3]}`, "el", ""},
		{"substring clamp", `{"@substring": ["hello", -5, 99]}`, "hello", ""},
		{"substring end before start", `{"@substring": ["hello", 3, 1]}`, "", ""},
		{"substring runes", `{"@substring": ["héllo wörld", 1, 8]}`, "éllo wö", ""},
		{"substring type", `{"@substring": ["hello", "1"]}`, nil, `@substring: argument 2 must be an integer, got string`},
		{"substring arity", `{"@substring": ["hello"]}`, nil, `@substring: expects 2 to 3 arguments, got 1`},
		{"startswith", `{"@startswith": ["$.spec.containers[0].image", "my-"]}`, true, ""},
		{"startswith false", `{"@startswith": ["abc", "b"]}`, false, ""},
		{"endswith", `{"@endswith": ["$.spec.containers[2].image", ":v1"]}`, true, ""},
		{"endswith type", `{"@endswith": [null, "x"]}`, nil, `@endswith: argument 1 must be a string, got null`},
		{"contains string", `{"@contains": ["hello", "ell"]}`, true, ""},
		{"contains string false", `{"@contains": ["hello", "z"]}`, false, ""},
		{"contains list", `{"@contains": ["$.status.counts", 2.0]}`, true, ""},
		{"contains list false", `{"@contains": [["a"], "b"]}`, false, ""},
		{"contains null", `{"@contains": ["$.nope", "b"]}`, false, ""},
		{"contains type", `{"@contains": [1, "b"]}`, nil, `@contains: argument 1 must be a string or a list, got int`},
		{"regexp", `{"@regexp": ["^my-container-[0-9]+:latest$", "$.spec.containers[0].image"]}`, true, ""},
		{"regexp unanchored", `{"@regexp": ["tain", "container"]}`, true, ""},
		{"regexp false", `{"@regexp": ["^x", "container"]}`, false, ""},
		{"regexp dynamic", `{"@regexp": [{"@concat": ["^", "$.metadata.labels.app"]}, "webserver"]}`, true, ""},
		{"regexp bad literal", `{"@regexp": ["(", "x"]}`, nil, `spec.x["@regexp"]: @regexp: invalid regular expression`},
		{"regexp bad dynamic", `{"@regexp": [{"@concat": ["("]}, "x"]}`, nil, `@regexp: invalid regular expression`},
		{"regexp type", `{"@regexp": ["x", 1]}`, nil, `@regexp: argument 2 must be a string, got int`},
		{"regexp pattern type", `{"@regexp": [1, "x"]}`, nil, `@regexp: argument 1 must be a string, got int`},
	})
}

func TestConversion(t *testing.T) {
	runCases(t, []evalCase{
		{"string int", `{"@string": 3}`, "3", ""},
		{"string float", `{"@string": 0.1}`, "0.1", ""},
		{"string integral float", `{"@string": 3.0}`, "3", ""},
		{"string big float", `{"@string": 1e21}`, "1e+21", ""},
		{"string small float", `{"@string": 1e-7}`, "1e-7", ""},
		{"string bool", `{"@string": true}`, "true", ""},
		{"string null", `{"@string": null}`, "", ""},
		{"string string", `{"@string": "x"}`, "x", ""},
		{"string map sorted", `{"@string": {"@noop": {"b": 1, "a": [true, null, "<x>"]}}}`, `{"a":[true,null,"<x>"],"b":1}`, ""},
		{"string list", `{"@string": [[1, 2.5]]}`, `[1,2.5]`, ""},
		{"int from string", `{"@int": "42"}`, int64(42), ""},
		{"int from float string", `{"@int": "4.9"}`, int64(4), ""},
		{"int from float", `{"@int": -4.9}`, int64(-4), ""},
		{"int from bool", `{"@int": true}`, int64(1), ""},
		{"int from null", `{"@int": null}`, int64(0), ""},
		{"int bad string", `{"@int": "abc"}`, nil, `@int: cannot convert "abc" to int`},
		{"int out of range", `{"@int": 1e30}`, nil, `@int: cannot convert 1e+30 to int: out of range`},
		{"int list", `{"@int": [[1]]}`, nil, `@int: argument must be a number, string or bool, got list`},
		{"float from int", `{"@float": 3}`, 3.0, ""},
		{"float from string", `{"@float": "2.5"}`, 2.5, ""},
		{"float from bool", `{"@float": false}`, 0.0, ""},
		{"float bad", `{"@float": "x"}`, nil, `@float: cannot convert "x" to float`},
		{"bool true", `{"@bool": "true"}`, true, ""},
		{"bool false", `{"@bool": "false"}`, false, ""},
		{"bool number", `{"@bool": 2}`, true, ""},
		{"bool zero", `{"@bool": 0.0}`, false, ""},
		{"bool null", `{"@bool": null}`, false, ""},
		{"bool bad string", `{"@bool": "yes"}`, nil, `@bool: cannot convert "yes" to bool`},
		{"bool map", `{"@bool": {"a": 1}}`, nil, `@bool: argument must be a bool, string or number, got map`},
	})
}

func TestUtility(t *testing.T) {
	runCases(t, []evalCase{
		{"exists", `{"@exists": "$.metadata.labels.app"}`, true, ""},
		{"exists wrapped", `{"@exists": ["$.metadata.labels.app"]}`, true, ""},
		{"exists missing", `{"@exists": "$.metadata.labels.nope.deeper"}`, false, ""},
		{"exists null", `{"@exists": "$.spec.nodeName"}`, false, ""},
		{"exists wildcard", `{"@exists": "$.spec.containers[*].ports"}`, true, ""},
		{"exists wildcard none", `{"@exists": "$.spec.containers[*].nope"}`, false, ""},
		{"exists expression", `{"@exists": {"@definedOr": ["$.nope", 1]}}`, true, ""},
		{"exists local", `{"@map": ["$$.name", {"@filter": [{"@exists": "$$.ports[0]"}, "$.spec.containers"]}]}`, l{"container-1"}, ""},
		{"isnil", `{"@isnil": "$.nope"}`, true, ""},
		{"isnil false", `{"@isnil": "$.kind"}`, false, ""},
		{"hash map", `{"@hash": {"@noop": {"a": 1}}}`, "b3gen2", ""},
		{"hash string", `{"@hash": "hello"}`, "5k5yl4", ""},
		{"hash sorted keys", `{"@hash": {"@noop": {"port": 80, "name": "web"}}}`, "dvz803", ""},
		{"hash numbers by value", `{"@eq": [{"@hash": {"@noop": {"a": 1, "b": 2}}}, {"@hash": {"@noop": {"b": 2.0, "a": 1}}}]}`, true, ""},
		{"hash differs", `{"@eq": [{"@hash": {"@noop": {"a": 1, "b": 2}}}, {"@hash": {"@noop": {"a": 1, "b": 3}}}]}`, false, ""},
		{"hash key order", `{"@eq": [{"@hash": {"@noop": {"a": 1, "b": 2}}}, {"@hash": {"@noop": {"b": 2, "a": 1}}}]}`, true, ""},
		{"rnd arity", `{"@rnd": [1]}`, nil, `@rnd: expects 2 arguments, got 1`},
		{"rnd empty", `{"@rnd": [3, 3]}`, nil, `@rnd: empty range [3, 3)`},
		{"rnd one", `{"@rnd": [3, 4]}`, int64(3), ""},
		{"now args", `{"@now": [1]}`, nil, `@now: expects no arguments`},
		{"selector matchLabels", `{"@selector": [{"matchLabels": {"app": "web"}}, "$.metadata.labels"]}`, true, ""},
		{"selector matchLabels miss", `{"@selector": [{"matchLabels": {"app": "db"}}, "$.metadata.labels"]}`, false, ""},
		{"selector In", `{"@selector": [{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend", "backend"]}]}, "$.metadata.labels"]}`, true, ""},
		{"selector NotIn", `{"@selector": [{"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frontend"]}]}, "$.metadata.labels"]}`, false, ""},
		{"selector Exists", `{"@selector": [{"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "$.metadata.labels"]}`, true, ""},
		{"selector DoesNotExist", `{"@selector": [{"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, "$.metadata.labels"]}`, false, ""},
		{"selector both", `{"@selector": [{"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, "$.metadata.labels"]}`, true, ""},
		{"selector empty matches all", `{"@selector": [{}, "$.metadata.labels"]}`, true, ""},
		{"selector empty matches no labels", `{"@selector": [{}, "$.nope"]}`, true, ""},
		{"selector null matches nothing", `{"@selector": [null, "$.metadata.labels"]}`, false, ""},
		{"selector plain map", `{"@selector": [{"app": "web"}, "$.metadata.labels"]}`, true, ""},
		{"selector dynamic", `{"@selector": [{"@dict": [["matchLabels", "$.metadata.labels"]]}, {"app": "web", "tier": "frontend", "x": "y"}]}`, true, ""},
		{"selector bad operator", `{"@selector": [{"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]}, {}]}`, nil, `spec.x["@selector"]: @selector: invalid label selector`},
		{"selector In without values", `{"@selector": [{"matchExpressions": [{"key": "a", "operator": "In"}]}, {}]}`, nil, `@selector: invalid label selector`},
		{"selector bad label value", `{"@selector": [{}, {"a": 1}]}`, nil, `@selector: label "a" must be a string, got int`},
		{"selector not map", `{"@selector": ["app=web", {}]}`, nil, `@selector: label selector must be a map, got string`},
		{"selector dynamic bad", `{"@selector": ["$.kind", {}]}`, nil, `@selector: label selector must be a map, got string`},
	})
}

func TestCEL(t *testing.T) {
	runCases(t, []evalCase{
		{"arith", `{"@cel": "self.spec.replicas * 2"}`, int64(6), ""},
		{"exists macro", `{"@cel": "self.metadata.labels.exists(k, k.startsWith('app'))"}`, true, ""},
		{"string", `{"@cel": "self.metadata.name + '-x'"}`, "my-pod-x", ""},
		{"list", `{"@cel": "self.spec.containers.map(c, c.name)"}`, l{"container-1", "container-2", "container-3"}, ""},
		{"map", `{"@cel": "{'n': self.kind, 'k': [1, 2.5]}"}`, m{"n": "Pod", "k": l{int64(1), 2.5}}, ""},
		{"int keys", `{"@cel": "{1: 'a'}"}`, m{"1": "a"}, ""},
		{"uint", `{"@cel": "3u"}`, int64(3), ""},
		{"null", `{"@cel": "null"}`, nil, ""},
		{"wrapped", `{"@cel": ["self.kind"]}`, "Pod", ""},
		{"local in map", `{"@map": [{"@cel": "self.name.size()"}, "$.spec.containers"]}`, l{int64(11), int64(11), int64(11)}, ""},
		{"global outside local arg", `{"@map": ["$$", {"@cel": "self.status.counts"}]}`, l{int64(3), int64(1), int64(2)}, ""},
		{"compile error", `{"@cel": "self.spec.replicas *"}`, nil, `spec.x["@cel"]: @cel: ERROR`},
		{"not literal", `{"@cel": "$.kind"}`, nil, `@cel: argument must be a literal string`},
		{"not string", `{"@cel": 1}`, nil, `@cel: argument must be a string, got int`},
		{"runtime error", `{"@cel": "self.nope.x"}`, nil, `@cel: no such key: nope`},
		{"runtime div zero", `{"@cel": "1 / (self.spec.replicas - 3)"}`, nil, `@cel: division by zero`},
	})
}

func TestRndNowDeterministic(t *testing.T) {
	e, err := Parse(decode(t, `{"r": {"@rnd": [10, 20]}, "t": "@now", "t2": {"@now": null}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2024, 10, 3, 15, 30, 11, 500, time.FixedZone("x", 2*3600))
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		v, err := e.Eval(&Context{Now: func() time.Time { return now }, Rand: r})
		if err != nil {
			t.Fatal(err)
		}
		got := v.(m)
		if n := got["r"].(int64); n < 10 || n >= 20 {
			t.Fatalf("@rnd out of range: %d", n)
		}
		if got["t"] != "2024-10-03T13:30:11Z" || got["t2"] != got["t"] {
			t.Fatalf("@now: got %v", got)
		}
	}
	if IsDeterministic(e) {
		t.Fatal("expression with @now/@rnd reported deterministic")
	}
	// Without Now/Rand the defaults are used.
	v, err := Eval(e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, v.(m)["t"].(string)); err != nil {
		t.Fatalf("@now is not RFC 3339: %v", err)
	}
	// Full int64 span does not overflow.
	e, err = Parse(decode(t, `{"@rnd": [-9223372036854775808, 9223372036854775807]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(nil); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{`{"a": "$.x"}`, `{"@map": [{"@cel": "self"}, [1]]}`, `"@nowhere"`} {
		e, err := Parse(decode(t, spec), "")
		if err != nil {
			t.Fatal(err)
		}
		if !IsDeterministic(e) {
			t.Fatalf("%s: reported non-deterministic", spec)
		}
	}
	e, _ = Parse(decode(t, `{"@map": [{"@rnd": [0, 2]}, [1]]}`), "")
	if IsDeterministic(e) {
		t.Fatal("nested @rnd reported deterministic")
	}
}

// TestHash checks @hash against Δ-controller's values: the first 6 base36
// digits of the MD5 of the Go JSON encoding (sorted keys).
func TestHash(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{m{"a": int64(1)}, "b3gen2"},
		{"hello", "5k5yl4"},
		{m{"name": "web", "port": int64(80)}, "dvz803"},
		{m{"name": "web", "port": 80.0}, "dvz803"},
	} {
		got, err := opHash(nil, tc.v)
		if err != nil || got != tc.want {
			t.Errorf("@hash %#v = %v, %v; want %q", tc.v, got, err, tc.want)
		}
	}
	got, err := Eval(mustParse(t, `{"@hash": "$.metadata"}`), pod(t))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(pod(t).(m)["metadata"])
	if want := hashBytes(js); got != want {
		t.Fatalf("@hash $.metadata = %v, want %q", got, want)
	}
	// Non-finite floats, which JSON cannot encode, still hash.
	if h, err := opHash(nil, math.NaN()); err != nil || len(h.(string)) != 6 {
		t.Fatalf("@hash NaN = %v, %v", h, err)
	}
	// An MD5 below 36^24 has fewer than 25 base36 digits: it is zero-padded
	// on the left, so its hash starts with "0".
	padded := 0
	for i := range 2000 {
		b := []byte(strings.Repeat("a", i))
		sum := md5.Sum(b)
		short := len(new(big.Int).SetBytes(sum[:]).Text(36)) < md5Base36Len
		h := hashBytes(b)
		if len(h) != hashLen || strings.Trim(h, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatalf("hash %q is not 6 base36 characters", h)
		}
		if short {
			padded++
			if h[0] != '0' {
				t.Fatalf("hash %q of a short MD5 is not zero-padded", h)
			}
		}
	}
	if padded == 0 {
		t.Fatal("no short MD5 among the inputs")
	}
}

func mustParse(t testing.TB, spec string) Expression {
	t.Helper()
	e, err := Parse(decode(t, spec), "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestErrorFormat(t *testing.T) {
	_, err := Parse(decode(t, `{"metadata": {"name": {"@frobnicate": 1}}}`), `spec.controllers[1].pipeline[2]["@project"]`)
	if err == nil || err.Error() != `spec.controllers[1].pipeline[2]["@project"].metadata.name: unknown operator "@frobnicate"` {
		t.Fatalf("got %v", err)
	}
	e, err := Parse(decode(t, `{"@len": true}`), "spec.x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Eval(&Context{})
	var ee *Error
	if !errors.As(err, &ee) {
		t.Fatalf("not an *Error: %v", err)
	}
	if ee.Path != `spec.x["@len"]` || ee.Op != "@len" || err.Error() != `spec.x["@len"]: @len: argument must be a list, string or map, got bool` {
		t.Fatalf("got %q (%+v)", err, ee)
	}
	if (&Error{Err: errors.New("boom")}).Error() != "boom" {
		t.Fatal("bad format without path and op")
	}
	if !errors.Is(&Error{Err: errDummy}, errDummy) {
		t.Fatal("Unwrap")
	}
	// Errors deep inside name the innermost path.
	_, err = Parse(decode(t, `{"@map": [{"@add": [1, {"@sub": [1]}]}, []]}`), "p")
	if err == nil || !strings.HasPrefix(err.Error(), `p["@map"][0]["@add"][1]["@sub"]: @sub: expects 2 arguments, got 1`) {
		t.Fatalf("got %v", err)
	}
}

var errDummy = errors.New("dummy")

func TestFieldIndex(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Field("", "spec"), "spec"},
		{Field("spec", "controllers"), "spec.controllers"},
		{Index(Field("spec", "controllers"), 0), "spec.controllers[0]"},
		{Field("spec.controllers[0].pipeline", "@project"), `spec.controllers[0].pipeline["@project"]`},
		{Field(`p["@project"]`, "metadata"), `p["@project"].metadata`},
		{Field("a", "dcontroller.io/n"), `a["dcontroller.io/n"]`},
		{Field("a", "_x9"), "a._x9"},
		{Field("a", "9x"), `a["9x"]`},
		{Field("a", ""), `a[""]`},
		{Field("", "@x"), `["@x"]`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	type S struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	x := 5
	for _, tc := range []struct {
		in, want any
	}{
		{nil, nil},
		{int(3), int64(3)},
		{int32(3), int64(3)},
		{uint8(3), int64(3)},
		{uint64(math.MaxUint64), float64(math.MaxUint64)},
		{float32(0.1), 0.1},
		{3.0, 3.0},
		{json.Number("12"), int64(12)},
		{json.Number("1.5"), 1.5},
		{json.Number("1e3"), 1000.0},
		{json.Number("x"), "x"},
		{[]string{"a"}, l{"a"}},
		{[]int{1}, l{int64(1)}},
		{map[string]int{"a": 1}, m{"a": int64(1)}},
		{map[any]any{"a": []any{1}}, m{"a": l{int64(1)}}},
		{map[any]any{1: 2}, nil},
		{[]byte("hi"), "aGk="},
		{&x, int64(5)},
		{S{A: 1}, m{"a": int64(1)}},
		{m{"a": l{int(1), m{"b": int8(2)}}}, m{"a": l{int64(1), m{"b": int64(2)}}}},
		{make(chan int), nil},
	} {
		if got := Normalize(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Normalize(%#v) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
	// Model values are returned without copying.
	in := m{"a": l{int64(1)}}
	if got := Normalize(in).(m); reflect.ValueOf(got).Pointer() != reflect.ValueOf(in).Pointer() {
		t.Error("Normalize copied a model value")
	}
}

func TestDeepEqualCompare(t *testing.T) {
	eq := []struct {
		a, b any
		want bool
	}{
		{int64(1), 1.0, true},
		{int(1), int64(1), true},
		{1.5, int64(1), false},
		{nil, nil, true},
		{nil, false, false},
		{"a", "a", true},
		{l{int64(1)}, []int{1}, true},
		{m{"a": 1.0}, map[string]int{"a": 1}, true},
		{m{"a": nil}, m{"b": nil}, false},
		{l{}, m{}, false},
		{int64(math.MaxInt64), float64(math.MaxInt64), false},
		{math.NaN(), math.NaN(), true},
	}
	for _, tc := range eq {
		if got := DeepEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("DeepEqual(%#v, %#v) = %v", tc.a, tc.b, got)
		}
		if got := DeepEqual(tc.b, tc.a); got != tc.want {
			t.Errorf("DeepEqual(%#v, %#v) = %v (reversed)", tc.b, tc.a, got)
		}
	}
	cmps := []struct {
		a, b any
		want int
		err  bool
	}{
		{int64(1), int64(2), -1, false},
		{2.5, int64(2), 1, false},
		{int64(2), 2.0, 0, false},
		{int64(math.MaxInt64), 9223372036854775808.0, -1, false},
		{int64(math.MinInt64), -9223372036854775808.0, 0, false},
		{int64(-3), -2.5, -1, false},
		{"b", "a", 1, false},
		{"a", "a", 0, false},
		{"a", int64(1), 0, true},
		{true, false, 0, true},
		{nil, nil, 0, true},
		{l{}, l{}, 0, true},
	}
	for _, tc := range cmps {
		got, err := Compare(tc.a, tc.b)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Compare(%#v, %#v) = %d, %v", tc.a, tc.b, got, err)
		}
	}
}

func TestParseInputs(t *testing.T) {
	// Go-typed specs (not from JSON).
	for _, tc := range []struct {
		spec any
		want any
	}{
		{int(3), int64(3)},
		{int32(3), int64(3)},
		{float64(3), float64(3)},
		{json.Number("7"), int64(7)},
		{map[string]any{"@add": []any{int(1), int32(2), json.Number("3")}}, int64(6)},
		{map[string]any{"@len": []string{"a", "b"}}, int64(2)},
		{map[string]any{"@concat": []string{"a", "b"}}, "ab"},
		{map[string]string{"a": "$.kind"}, m{"a": "Pod"}},
	} {
		e, err := Parse(tc.spec, "")
		if err != nil {
			t.Fatalf("%#v: %v", tc.spec, err)
		}
		got, err := Eval(e, pod(t))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%#v: got %#v, %v; want %#v", tc.spec, got, err, tc.want)
		}
	}
	if _, err := Parse(json.Number("1x"), "p"); err == nil || err.Error() != `p: invalid number "1x"` {
		t.Fatalf("got %v", err)
	}
	if _, err := Parse(make(chan int), "p"); err == nil || !strings.HasPrefix(err.Error(), "p: unsupported value") {
		t.Fatalf("got %v", err)
	}
	if _, err := Eval(nil, nil); err == nil {
		t.Fatal("Eval(nil) did not fail")
	}
}

func TestLiteralResultsAreFresh(t *testing.T) {
	e := mustParse(t, `{"a": [1, {"b": 2}]}`)
	v1, _ := e.Eval(nil)
	v1.(m)["a"].([]any)[1].(m)["b"] = "changed"
	v2, _ := e.Eval(nil)
	if !reflect.DeepEqual(v2, m{"a": l{int64(1), m{"b": int64(2)}}}) {
		t.Fatalf("literal modified through a result: %#v", v2)
	}
}

func TestQueryAndSetterAPI(t *testing.T) {
	q, err := ParseQuery("$.spec.containers[0].name")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Singular() || q.Root() != "$" || q.String() != "$.spec.containers[0].name" {
		t.Fatalf("bad query %v", q)
	}
	want := []Segment{{Name: "spec"}, {Name: "containers"}, {Index: 0, IsIndex: true}, {Name: "name"}}
	if !reflect.DeepEqual(q.Segments(), want) {
		t.Fatalf("segments %#v", q.Segments())
	}
	if v, ok := q.Get(pod(t)); !ok || v != "container-1" {
		t.Fatalf("Get = %v, %v", v, ok)
	}
	if v, ok := q.Get(m{}); ok || v != nil {
		t.Fatalf("Get on empty = %v, %v", v, ok)
	}
	if got := q.Select(pod(t)); !reflect.DeepEqual(got, l{"container-1"}) {
		t.Fatalf("Select = %#v", got)
	}
	w, err := ParseQuery("$$[*].name")
	if err != nil {
		t.Fatal(err)
	}
	if w.Singular() || w.Root() != "$$" || w.Segments() != nil {
		t.Fatal("wildcard reported singular")
	}
	if got, _ := w.Get(l{m{"name": "a"}, m{"name": "b"}}); !reflect.DeepEqual(got, l{"a", "b"}) {
		t.Fatalf("Get = %#v", got)
	}
	if _, err := ParseQuery("$.a["); err == nil {
		t.Fatal("bad query parsed")
	}
	if _, err := ParseQuery("a.b"); err == nil {
		t.Fatal("query without $ parsed")
	}

	s, err := ParseSetter(`$.metadata.annotations["dcontroller.io/x"]`)
	if err != nil {
		t.Fatal(err)
	}
	labels := m{"app": "web"}
	obj := m{"metadata": m{"name": "a", "labels": labels}}
	if err := s.Set(obj, "v"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(obj, m{"metadata": m{"name": "a", "labels": m{"app": "web"}, "annotations": m{"dcontroller.io/x": "v"}}}) {
		t.Fatalf("Set: %#v", obj)
	}
	s2, _ := ParseSetter("$.metadata.labels.app")
	if err := s2.Set(obj, "db"); err != nil {
		t.Fatal(err)
	}
	if labels["app"] != "web" || obj["metadata"].(m)["labels"].(m)["app"] != "db" {
		t.Fatal("Set did not copy on write")
	}
	s3, _ := ParseSetter("$.spec.list[0].x")
	if err := s3.Set(obj, 1); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(obj["spec"], m{"list": l{m{"x": 1}}}) {
		t.Fatalf("Set created %#v", obj["spec"])
	}
	s4, _ := ParseSetter("$.spec.list[-1].y")
	if err := s4.Set(obj, 2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(obj["spec"], m{"list": l{m{"x": 1, "y": 2}}}) {
		t.Fatalf("Set negative index: %#v", obj["spec"])
	}
	var ee *Error
	if err := s3.Set(m{"spec": m{"list": "x"}}, 1); !errors.As(err, &ee) {
		t.Fatalf("want *Error, got %v", err)
	}
	if err := s3.Set(nil, 1); err == nil {
		t.Fatal("Set on nil map succeeded")
	}
	for _, bad := range []string{"$", "$[0]", "$..a", "$.a[*]", "$$.a", "$.a[1:2]", "x", "$.["} {
		if _, err := ParseSetter(bad); err == nil {
			t.Errorf("ParseSetter(%q) succeeded", bad)
		}
	}
}

func TestInspect(t *testing.T) {
	e := mustParse(t, `{"@and": [{"@eq": ["$.Pod.metadata.name", "$.Svc.spec.name"]}, {"@eq": ["$$.x[0]", 1]}]}`)
	op, args, ok := Operator(e)
	if !ok || op != "@and" || len(args) != 2 {
		t.Fatalf("Operator = %v %v %v", op, args, ok)
	}
	op, eqArgs, ok := Operator(args[0])
	if !ok || op != "@eq" || len(eqArgs) != 2 {
		t.Fatalf("Operator = %v %v %v", op, eqArgs, ok)
	}
	segs, root, ok := SingularPath(eqArgs[0])
	if !ok || root != "$" || !reflect.DeepEqual(segs, []string{"Pod", "metadata", "name"}) {
		t.Fatalf("SingularPath = %v %v %v", segs, root, ok)
	}
	_, eq2, _ := Operator(args[1])
	if _, _, ok := SingularPath(eq2[0]); ok {
		t.Fatal("SingularPath accepted an index segment")
	}
	if q, ok := QueryOf(eq2[0]); !ok || q.Root() != "$$" || len(q.Segments()) != 2 {
		t.Fatal("QueryOf")
	}
	if v, ok := Literal(eq2[1]); !ok || v != int64(1) {
		t.Fatalf("Literal = %v %v", v, ok)
	}
	if _, _, ok := Operator(eq2[1]); ok {
		t.Fatal("Operator on a literal")
	}
	if _, ok := Literal(e); ok {
		t.Fatal("Literal on a call")
	}
	if e.Path() != `["@and"]` || args[0].Path() != `["@and"][0]["@eq"]` || eqArgs[1].Path() != `["@and"][0]["@eq"][1]` {
		t.Fatalf("paths %q %q %q", e.Path(), args[0].Path(), eqArgs[1].Path())
	}
	n := 0
	Walk(e, func(Expression) bool { n++; return true })
	if n != 7 {
		t.Fatalf("Walk visited %d nodes", n)
	}
	if len(Children(mustParse(t, `{"a": "$.x", "$.b": "$.y"}`))) != 2 {
		t.Fatal("Children of map")
	}
	if len(Operators()) != 69 {
		t.Fatalf("%d operators: %v", len(Operators()), Operators())
	}
}

func TestNilContext(t *testing.T) {
	for _, spec := range []string{`"$.a"`, `"$$.a"`, `{"@map": ["$$", [1]]}`, `{"@cel": "self == null"}`, `"@now"`, `{"@exists": "$.a"}`} {
		if _, err := mustParse(t, spec).Eval(nil); err != nil {
			t.Errorf("%s: %v", spec, err)
		}
	}
}

func TestDepthLimit(t *testing.T) {
	spec := strings.Repeat(`{"@not": `, maxDepth) + "true" + strings.Repeat("}", maxDepth)
	_, err := Parse(decode(t, spec), "p")
	if err == nil || !strings.Contains(err.Error(), "nested more than 1000 levels deep") {
		t.Fatalf("got %v", err)
	}
	spec = strings.Repeat(`{"@not": `, maxDepth-1) + "true" + strings.Repeat("}", maxDepth-1)
	v, err := Eval(mustParse(t, spec), nil)
	if err != nil || v != false { // 999 negations of true
		t.Fatalf("got %v, %v", v, err)
	}
}

func TestCELConversions(t *testing.T) {
	runCases(t, []evalCase{
		{"bytes", `{"@cel": "b'hi'"}`, "aGk=", ""},
		{"timestamp", `{"@cel": "timestamp('2024-10-03T13:30:11Z')"}`, "2024-10-03T13:30:11Z", ""},
		{"duration", `{"@cel": "duration('90s')"}`, "1m30s", ""},
		{"big uint", `{"@cel": "18446744073709551615u"}`, 1.8446744073709552e19, ""},
		{"double", `{"@cel": "self.status.ratio * 3.0"}`, 1.5, ""},
		{"nested", `{"@cel": "{'a': [{'b': true}], 'c': {'d': null}}"}`, m{"a": l{m{"b": true}}, "c": m{"d": nil}}, ""},
		{"subject passthrough", `{"@cel": "self.metadata.labels"}`, m{"app": "web", "tier": "frontend"}, ""},
		{"type value", `{"@cel": "type(1)"}`, nil, "unsupported CEL result"},
		{"strings ext", `{"@cel": "self.metadata.name.upperAscii()"}`, "MY-POD", ""},
		{"fold local", `{"@fold": [{"@cel": "self.acc + self.item"}, 0, "$.status.counts"]}`, int64(6), ""},
		{"filter local", `{"@filter": [{"@cel": "self > 1"}, "$.status.counts"]}`, l{int64(3), int64(2)}, ""},
		{"any local", `{"@any": [{"@cel": "self.name == 'container-3'"}, "$.spec.containers"]}`, true, ""},
		{"sortBy local", `{"@sortBy": [{"@cel": "-self"}, "$.status.counts"]}`, l{int64(3), int64(2), int64(1)}, ""},
	})
}

func TestCanonicalJSON(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"a\"b\\c\n\t\r\x01<>&é", `"a\"b\\c\n\t\r\u0001<>&é"`},
		{"\xff", `"\ufffd"`},
		{math.Inf(1), `"+Inf"`},
		{l{math.NaN(), math.Inf(-1)}, `["NaN","-Inf"]`},
		{m{"b": int64(1), "a": l{}, "c": m{}}, `{"a":[],"b":1,"c":{}}`},
		{1e-7, `1e-7`},
		{123456789.0, `123456789`},
		{[]int{1}, `[1]`},
	} {
		if got := canonicalJSON(tc.in); got != tc.want {
			t.Errorf("canonicalJSON(%#v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	// The canonical form of JSON-safe values is valid JSON that decodes back.
	v := m{"s": "x\u2028y", "n": l{int64(-1), 1.25, true, nil}}
	var back any
	if err := json.Unmarshal([]byte(canonicalJSON(v)), &back); err != nil {
		t.Fatal(err)
	}
	if !DeepEqual(back, v) {
		t.Fatalf("round trip: %#v", back)
	}
}

func TestConcurrentEval(t *testing.T) {
	e := mustParse(t, `{"n": {"@len": "$.spec.containers"}, "c": {"@cel": "self.kind"},
	  "r": {"@regexp": ["^my", "$.metadata.name"]}, "s": {"@selector": [{"app": "web"}, "$.metadata.labels"]},
	  "m": {"@map": ["$$.name", "$.spec.containers"]}, "$.x.y": 1}`)
	subject := pod(t)
	want, err := e.Eval(&Context{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for range 4 {
		go func() {
			for range 50 {
				got, err := e.Eval(&Context{Subject: subject})
				if err != nil || !reflect.DeepEqual(got, want) {
					done <- errors.New("concurrent evaluation differs")
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestInChainsNot: `x in [a, b] in [a, b] ...` is refused instead of
// repeating the left operand once per list element at every step.
func TestInChainsNot(t *testing.T) {
	text := "$[?@" + strings.Repeat(" in [1, 2]", 40) + "]"
	if _, err := ParseQuery(text); err == nil || !strings.Contains(err.Error(), `"in" needs a left-hand operand`) {
		t.Fatalf("chained in: %v", err)
	}
}

// TestDeltaControllerSpellings runs queries and setters as Δ-controller's
// users write them, with the values Δ-controller gives.
func TestDeltaControllerSpellings(t *testing.T) {
	subject := Normalize(decode(t, `{
	  "metadata": {"namespace": "default2", "name": "name"},
	  "spec": [
	    {"name": "name1", "a": 1, "b": {"c": 2}},
	    {"name": "name2", "a": 2, "b": {"d": 3}}
	  ]
	}`))
	cases := []evalCase{
		{"filter deref", `"$.spec[?(@.name == 'name1')].b"`, m{"c": int64(2)}, ""},
		{"filter element", `"$.spec[?(@.name == 'name2')]"`, m{"name": "name2", "a": int64(2), "b": m{"d": int64(3)}}, ""},
		{"in", `"$.spec[?(@.name in ['name1', 'name2'])].b.d"`, int64(3), ""},
		{"root getter", `{"a": "$."}`, m{"a": subject}, ""},
		{"root setter", `{"$.": {"a": "b"}}`, m{"a": "b"}, ""},
		{"root setter non-map", `{"$.": "a"}`, nil, `the value must be a map`},
		{"padding setter", `{"$.y[3]": 12}`, m{"y": l{nil, nil, nil, int64(12)}}, ""},
		{"setter with query", `{"$.y.z": "$.spec[0].b"}`, m{"y": m{"z": m{"c": int64(2)}}}, ""},
		{"hash", `{"@hash": {"@noop": {"name": "web", "port": 80}}}`, "dvz803", ""},
	}
	runCasesOn(t, subject, cases)
}

// TestDashNames: dotted member names with hyphens, as Kubernetes label and
// annotation keys have them, read and set like bracketed names.
func TestDashNames(t *testing.T) {
	obj := map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{"app-name": "web", "tier": "front"},
		"annotations": map[string]any{"new-annotation": "x"},
	}, "items": []any{map[string]any{"node-role": "a"}, map[string]any{"node-role": "b"}}}
	for _, tc := range []struct {
		query string
		want  any
	}{
		{"$.metadata.labels.app-name", "web"},
		{"$.metadata.annotations.new-annotation", "x"},
		{"$.metadata.labels['app-name']", "web"},
		{"$..node-role", []any{"a", "b"}},
		{"$.items[?(@.node-role == 'b')].node-role", "b"},
		{"$.items[?(@.node-role == 'a-b')].node-role", nil},
		{"$.metadata.labels.tier", "front"},
	} {
		q, err := ParseQuery(tc.query)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		got, err := q.Eval(&Context{Subject: obj})
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		if !DeepEqual(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.query, got, tc.want)
		}
	}
	s, err := ParseSetter("$.metadata.labels.app-name")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := s.Set(out, "api"); err != nil {
		t.Fatal(err)
	}
	if !DeepEqual(out, map[string]any{"metadata": map[string]any{"labels": map[string]any{"app-name": "api"}}}) {
		t.Errorf("setter wrote %v", out)
	}
	if got := rewriteDashNames(`$.a["x.y-z"].b-c`); got != `$.a["x.y-z"]['b-c']` {
		t.Errorf("string literal rewritten: %s", got)
	}
	if got := rewriteDashNames(`$.a[?(@.x == -1.5)]`); got != `$.a[?(@.x == -1.5)]` {
		t.Errorf("number rewritten: %s", got)
	}
}
