package rgd

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStatusFieldErrors: a status field whose expression fails (division
// by zero, an index out of range) is left unset; the other fields, kro's
// state (ERROR) and the conditions are written, GraphResolved and Ready
// naming the failing fields by their path in the RGD.
func TestStatusFieldErrors(t *testing.T) {
	c, err := Compile(decodeRGDTB(t, `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: statuserr}
spec:
  schema:
    apiVersion: v1alpha1
    kind: StatusErr
    spec:
      divisor: integer | default=0
      items: '[]string | default=["a"]'
    status:
      name: ${cm.metadata.name}
      ratio: ${100 / schema.spec.divisor}
      third: ${schema.spec.items[2]}
  resources:
    - id: cm
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-se"}
`))
	if err != nil {
		t.Fatal(err)
	}
	inst, _, err := runInstance(t, c, "StatusErr", map[string]any{"divisor": int64(0), "items": []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ := unstructured.NestedMap(inst.Object, "status")
	if st["name"] != "f-se" || st["state"] != "ERROR" {
		t.Fatalf("status %v", st)
	}
	if v, ok := st["ratio"]; ok && v != nil {
		t.Errorf("ratio %v, want unset", v)
	}
	want := "spec.schema.status.ratio: division by zero; spec.schema.status.third: index out of bounds: 2"
	got := map[string][]any{}
	for _, cd := range st["conditions"].([]any) {
		cd := cd.(map[string]any)
		got[cd["type"].(string)] = []any{cd["status"], cd["reason"], cd["message"]}
	}
	for typ, w := range map[string][]any{
		"GraphResolved":  {"False", "ResolutionFailed", want},
		"Ready":          {"False", "ResolutionFailed", want},
		"ResourcesReady": {"True", "AllResourcesReady", "every included resource exists and is ready"},
	} {
		if !reflect.DeepEqual(got[typ], w) {
			t.Errorf("%s: %v, want %v", typ, got[typ], w)
		}
	}
	// Once the expressions evaluate, the fields are set and the errors go.
	inst, _, err = runInstance(t, c, "StatusErr", map[string]any{"divisor": int64(4), "items": []any{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	st, _, _ = unstructured.NestedMap(inst.Object, "status")
	if st["ratio"] != int64(25) || st["third"] != "c" || st["state"] != "ACTIVE" {
		t.Fatalf("status %v", st)
	}
}

// TestConditionTypes: includeWhen and readyWhen whose type is known and is
// not bool are refused at compile time with their path (kro refuses them
// when the RGD is created); bool ones and ones of unknown type pass.
func TestConditionTypes(t *testing.T) {
	rgd := func(include, ready, eachReady string) string {
		return `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: conds}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Conds
    spec: {name: string, on: boolean, n: integer}
  resources:
    - id: deploy
      includeWhen: ["` + include + `"]
      readyWhen: ["` + ready + `"]
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: "${schema.spec.name}"}
        spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}}
    - id: cms
      forEach: [{i: "${lists.range(2)}"}]
      readyWhen: ["` + eachReady + `"]
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name + string(i)}"}
`
	}
	ok := [3]string{"${schema.spec.on}", "${deploy.status.availableReplicas > 0}", "${each.metadata.name != ''}"}
	for _, tc := range []struct {
		in      [3]string
		wantErr string
	}{
		{ok, ""},
		{[3]string{"${schema.spec.name}", ok[1], ok[2]}, "spec.resources[0].includeWhen[0]: must return a bool, got string"},
		{[3]string{"${schema.spec.n + 1}", ok[1], ok[2]}, "spec.resources[0].includeWhen[0]: must return a bool, got int"},
		{[3]string{ok[0], "${deploy.status.availableReplicas}", ok[2]}, "spec.resources[0].readyWhen[0]: must return a bool, got int"},
		{[3]string{ok[0], ok[1], "${each.metadata.name}"}, "spec.resources[1].readyWhen[0]: must return a bool, got string"},
	} {
		_, err := Compile(decodeRGDTB(t, rgd(tc.in[0], tc.in[1], tc.in[2])))
		if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("%v: got %v, want %q", tc.in, err, tc.wantErr)
		}
	}
}
