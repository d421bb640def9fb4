package main

import (
	"bytes"
	"strings"
	"testing"
)

// Integer literals of an Operator's pipeline stay integers on their way
// through the Operator's JSON: in the successor's dialect (targets:) @div of
// two integers truncates, also when one of them comes from an object.
func TestEvalIntegerLiteralsStayIntegers(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: div}
spec:
  controllers:
    - name: d
      sources: [{apiGroup: example.io, kind: Num}]
      pipeline:
        - "@project":
            metadata: {name: $.metadata.name, namespace: $.metadata.namespace}
            lit: {"@div": [7, 2]}
            obj: {"@div": ["$.spec.num", 2]}
            float: {"@div": [7, 2.5]}
      targets: [{kind: Out}]
`)
	in := writeFile(t, "in.yaml", `apiVersion: example.io/v1
kind: Num
metadata: {name: b, namespace: x}
spec: {num: 7}
`)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"eval", "-f", op, "-i", in}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"lit: 3\n", "obj: 3\n", "float: 2.8\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}
