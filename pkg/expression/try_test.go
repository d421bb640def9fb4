package expression

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// TestTry: @try turns a failure into {"error": cause} and a success into
// {"value": v}, in both dialects; the budget still ends the evaluation.
func TestTry(t *testing.T) {
	for _, d := range []Dialect{DialectDeltaController, DialectDBSP} {
		for _, tc := range []struct {
			spec any
			want any
		}{
			{map[string]any{"@try": map[string]any{"@div": []any{int64(6), int64(3)}}}, map[string]any{"value": int64(2)}},
			{map[string]any{"@try": map[string]any{"@div": []any{int64(1), int64(0)}}}, map[string]any{"error": "division by zero"}},
			{map[string]any{"@try": "$.missing"}, map[string]any{"value": nil}},
			{map[string]any{"@try": map[string]any{"@cel": map[string]any{"expr": "1 / x", "vars": map[string]any{"x": int64(0)}, "library": "kro"}}}, map[string]any{"error": "division by zero"}},
		} {
			e, err := ParseWith(tc.spec, "spec.x", ParseOptions{Dialect: d})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Eval(e, map[string]any{})
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%v: got %v, %v; want %v", tc.spec, got, err, tc.want)
			}
		}
	}
	e, err := Parse(map[string]any{"@try": map[string]any{"@map": []any{"$$", map[string]any{"@range": int64(100)}}}}, "spec.x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(e, &Context{Subject: map[string]any{}, Budget: NewBudget(context.Background(), Limits{Steps: 10})})
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want the budget error", err)
	}
}
