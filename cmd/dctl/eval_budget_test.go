package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// budgetOperator holds the red team's expression (2³² values for one
// object) next to a controller that stays within its budget.
const budgetOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: budget}
spec:
  controllers:
    - name: square
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          x: {"@map": [{"@range": 65536}, {"@range": 65536}]}
      target: {kind: Square}
    - name: fine
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          size: {"@len": {"@range": 1000}}
      target: {kind: Fine}
`

// dctl eval of an expression over its evaluation budget exits 2 with the
// budget error at the expression's path, promptly, and the other
// controller's output is there; --max-eval-values sets the budget.
func TestEvalBudget(t *testing.T) {
	op := writeFile(t, "op.yaml", budgetOperator)
	input := writeFile(t, "in.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n")
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		// The inner lists exceed the default budget; the outer one 1500.
		{nil, `x["@map"][0]["@range"]: @range: evaluation exceeded its budget of 2097152 values (document default/a)`},
		{[]string{"--max-eval-values", "1500"}, `x["@map"][1]["@range"]: @range: evaluation exceeded its budget of 1500 values (document default/a)`},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := Execute(append([]string{"eval", "-f", op, "-i", input}, tc.flags...), nil, &stdout, &stderr)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("dctl eval took %s", took)
		}
		if code != 2 {
			t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
		}
		prefix := `controller "square": spec.controllers[0].pipeline["@project"].`
		if !strings.Contains(stderr.String(), prefix+tc.want) {
			t.Errorf("stderr lacks %q:\n%s", prefix+tc.want, stderr.String())
		}
		if strings.Contains(stderr.String(), `controller "fine"`) {
			t.Errorf("the other controller failed too:\n%s", stderr.String())
		}
		if want := "kind: Fine\nmetadata:\n  name: a\n  namespace: default\nsize: 1000\n"; !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks the other controller's output %q:\n%s", want, stdout.String())
		}
	}
}
