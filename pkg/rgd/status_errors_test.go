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
