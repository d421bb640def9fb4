package dtest

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/object"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	m, err := object.FromJSON(j)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMatch(t *testing.T) {
	actual := `
metadata: {name: a, labels: {app: web, tier: front}, annotations: {"example.io/x": "1"}}
spec:
  replicas: 2
  ratio: 0.5
  ports: [{port: 80, name: http}, {port: 443, name: https}]
  empty: null
`
	for _, tc := range []struct {
		name, expected string
		want           []string // the paths that differ
	}{
		{"a subset of keys", `{metadata: {labels: {app: web}}}`, nil},
		{"a list element by element, its elements partially", `{spec: {ports: [{port: 80}, {name: https}]}}`, nil},
		{"numbers by value", `{spec: {replicas: 2.0, ratio: 0.5}}`, nil},
		{"null matches absent and null", `{spec: {missing: null, empty: null}}`, nil},
		{"a different scalar", `{metadata: {annotations: {"example.io/x": "2"}}}`, []string{`metadata.annotations["example.io/x"]`}},
		{"a number is not its string", `{spec: {replicas: "2"}}`, []string{"spec.replicas"}},
		{"an absent key", `{spec: {paused: true}}`, []string{"spec.paused"}},
		{"a list of another length", `{spec: {ports: [{port: 80}]}}`, []string{"spec.ports"}},
		{"a list element differs", `{spec: {ports: [{port: 80}, {port: 8443}]}}`, []string{"spec.ports[1].port"}},
		{"a map where a scalar is", `{spec: {replicas: {value: 2}}}`, []string{"spec.replicas"}},
		{"several, sorted", `{spec: {replicas: 3, ratio: 1}, metadata: {name: b}}`, []string{"metadata.name", "spec.ratio", "spec.replicas"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range Match(decode(t, tc.expected), decode(t, actual), "") {
				got = append(got, d.Path)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("differing paths %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormatDifferences(t *testing.T) {
	diffs := Match(decode(t, `{spec: {a: 1, b: [1, 2]}}`), decode(t, `{spec: {b: [1]}}`), "")
	want := `  spec.a
    - expected: 1
    + actual:   (absent)
  spec.b
    - expected: [1,2]
    + actual:   [1]
`
	if got := FormatDifferences(diffs, "  "); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
