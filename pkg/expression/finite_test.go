package expression

import (
	"math"
	"strings"
	"testing"
)

// No operator makes a NaN or ±Inf: JSON cannot carry one, so an object
// holding it could be neither written nor listed. Each such result is an
// error naming the expression's path.
func TestNonFinite(t *testing.T) {
	const hint = "JSON (RFC 8259 §6) and the Kubernetes API have no NaN or Infinity"
	runCases(t, []evalCase{
		{"float NaN", `{"@float": "NaN"}`, nil, `spec.x["@float"]: @float: cannot convert "NaN" to float: not a finite number (` + hint + `)`},
		{"float Inf", `{"@float": "Inf"}`, nil, `@float: cannot convert "Inf" to float: not a finite number`},
		{"float +Inf", `{"@float": "+Inf"}`, nil, `@float: cannot convert "+Inf" to float: not a finite number`},
		{"float -inf", `{"@float": " -inf"}`, nil, `@float: cannot convert " -inf" to float: not a finite number`},
		{"float infinity", `{"@float": "infinity"}`, nil, `@float: cannot convert "infinity" to float: not a finite number`},
		{"float nan lowercase", `{"@float": "nan"}`, nil, `not a finite number`},
		{"float out of range", `{"@float": "1e400"}`, nil, `@float: cannot convert "1e400" to float`},
		{"float largest", `{"@float": "1.7976931348623157e308"}`, math.MaxFloat64, ""},
		{"int NaN", `{"@int": "NaN"}`, nil, `@int: cannot convert "NaN" to int`},
		{"add overflow", `{"@add": [1.7976931348623157e308, 1.7976931348623157e308]}`, nil,
			`spec.x["@add"]: @add: result +Inf is not a finite number (` + hint + `)`},
		{"add back from overflow", `{"@add": [1e308, 1e308, -1e308]}`, nil, `@add: result +Inf is not a finite number`},
		{"add largest", `{"@add": [1.7976931348623157e308, -1e308]}`, 7.976931348623157e307, ""},
		{"sum overflow", `{"@sum": [[1e308, 1e308]]}`, nil, `@sum: result +Inf is not a finite number`},
		{"sub overflow", `{"@sub": [-1e308, 1e308]}`, nil, `@sub: result -Inf is not a finite number`},
		{"mul overflow", `{"@mul": [1e200, 1e200]}`, nil, `@mul: result +Inf is not a finite number`},
		{"mul overflow then zero", `{"@mul": [1e200, 1e200, 0]}`, nil, `@mul: result NaN is not a finite number`},
		{"mul negative overflow", `{"@mul": [-1e200, 1e200]}`, nil, `@mul: result -Inf is not a finite number`},
		{"div overflow", `{"@div": [1e308, 1e-308]}`, nil, `@div: result +Inf is not a finite number`},
		{"fold overflow", `{"@fold": [{"@mul": ["$$.acc", 1e100]}, 1, [1, 2, 3, 4]]}`, nil,
			`spec.x["@fold"][0]["@mul"]: @mul: result +Inf is not a finite number`},
		{"cel NaN", `{"@cel": "double('NaN')"}`, nil, `spec.x["@cel"]: @cel: CEL result holds the double NaN, not a finite number (` + hint + `)`},
		{"cel Inf", `{"@cel": "1.0 / 0.0"}`, nil, `@cel: CEL result holds the double +Inf, not a finite number`},
		{"cel -Inf", `{"@cel": "-1e308 * 10.0"}`, nil, `@cel: CEL result holds the double -Inf`},
		{"cel Inf in a list", `{"@cel": "[1.0, double('inf')]"}`, nil, `@cel: CEL result holds the double +Inf`},
		{"cel Inf in a map", `{"@cel": "{'r': double('-Infinity')}"}`, nil, `@cel: CEL result holds the double -Inf`},
		{"cel finite", `{"@cel": "1.0 / 4.0"}`, 0.25, ""},
		{"cel Inf compared", `{"@cel": "1.0 / 0.0 > 1.0"}`, true, ""},
		{"string NaN stays a string", `{"@string": "NaN"}`, "NaN", ""},
	})
	// A subject can only hold NaN or ±Inf when a Go caller puts it there
	// (JSON has none); the arithmetic operators and @float still refuse to
	// pass it on as their result.
	runCasesOn(t, map[string]any{"nan": math.NaN(), "inf": math.Inf(1)}, []evalCase{
		{"float of NaN", `{"@float": "$.nan"}`, nil, `@float: result NaN is not a finite number`},
		{"add NaN", `{"@add": ["$.nan", 1]}`, nil, `@add: result NaN is not a finite number`},
		{"neg Inf", `{"@neg": "$.inf"}`, nil, `@neg: result -Inf is not a finite number`},
		{"abs Inf", `{"@abs": "$.inf"}`, nil, `@abs: result +Inf is not a finite number`},
		{"mod Inf", `{"@mod": ["$.inf", 2]}`, nil, `@mod: result NaN is not a finite number`},
		{"floor NaN", `{"@floor": "$.nan"}`, nil, `@floor: NaN is out of the integer range`},
	})
}

// A NaN or ±Inf literal (only a Go caller can pass one: JSON and YAML
// specs have none) is a parse error naming its path.
func TestNonFiniteLiteral(t *testing.T) {
	for _, spec := range []any{math.NaN(), float32(math.Inf(1)), []any{1.0, math.Inf(-1)}, map[string]any{"r": math.NaN(), "n": "$.kind"}} {
		_, err := Parse(spec, "spec.x")
		if err == nil {
			t.Fatalf("Parse(%v) succeeded, want an error", spec)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "spec.x") || !strings.Contains(msg, "is not a finite number") {
			t.Fatalf("Parse(%v) = %v", spec, err)
		}
	}
}
