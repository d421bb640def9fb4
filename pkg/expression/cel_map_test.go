package expression

import (
	"reflect"
	"strings"
	"testing"
)

// The map form of @cel: named variables, the kro library (a missing key is
// null there, an error in the standard library), and errors at the key at
// fault.
func TestCELMapForm(t *testing.T) {
	subject := map[string]any{"spec": map[string]any{"name": "web", "replicas": int64(2)}}
	for _, tc := range []struct {
		name string
		spec any
		want any
		err  string
	}{
		{"vars", map[string]any{"@cel": map[string]any{"expr": "n + '-' + string(r)", "vars": map[string]any{"n": "$.spec.name", "r": "$.spec.replicas"}}}, "web-2", ""},
		{"self beside vars", map[string]any{"@cel": map[string]any{"expr": "self.spec.name + x", "vars": map[string]any{"x": "!"}}}, "web!", ""},
		{"kro functions", map[string]any{"@cel": map[string]any{"expr": "{'a': 1}.merge({'b': 2})", "library": "kro"}}, map[string]any{"a": int64(1), "b": int64(2)}, ""},
		{"kro missing key is null", map[string]any{"@cel": map[string]any{"expr": "s.status.url", "vars": map[string]any{"s": "$"}, "library": "kro"}}, nil, ""},
		{"kro omit is null", map[string]any{"@cel": map[string]any{"expr": "omit()", "library": "kro"}}, nil, ""},
		{"standard missing key is an error", map[string]any{"@cel": map[string]any{"expr": "s.status.url", "vars": map[string]any{"s": "$"}}}, nil, "no such key"},
		{"standard has no kro functions", map[string]any{"@cel": map[string]any{"expr": "{'a': 1}.merge({'b': 2})"}}, nil, `["@cel"].expr: @cel:`},
		{"unknown key", map[string]any{"@cel": map[string]any{"expr": "1", "variables": map[string]any{}}}, nil, `["@cel"].variables: @cel: unknown key`},
		{"bad name", map[string]any{"@cel": map[string]any{"expr": "1", "vars": map[string]any{"a-b": 1}}}, nil, `vars["a-b"]: @cel: "a-b" is not a CEL identifier`},
		{"bad library", map[string]any{"@cel": map[string]any{"expr": "1", "library": "k8s"}}, nil, `.library: @cel: want "standard" or "kro"`},
		{"no expr", map[string]any{"@cel": map[string]any{"vars": map[string]any{}}}, nil, `.expr: @cel: a string is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Parse(tc.spec, "e")
			var got any
			if err == nil {
				got, err = Eval(x, subject)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}
