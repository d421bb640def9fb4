package rgd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

// FuzzSimpleSchema compiles a field string f, with a custom type T defined
// by the field string typ, as the field x of an instance spec, into a
// whole CRD. Whatever the input, compiling must not panic, must fail only
// with an *Error at a path of the schema, and must stay within the schema
// node bound.
func FuzzSimpleSchema(f *testing.F) {
	for _, seed := range [][2]string{
		{"string", "integer"},
		{"integer | default=3 minimum=1 maximum=10", "string"},
		{`string | description="a \"b\" c" pattern="^[a-z]+$" enum="a,b"`, "string | required=true"},
		{`map[string]string | default={"a": "\"true\""}`, "object"},
		{`[]T | listType=map listMapKey=name uniqueItems=false minItems=0 maxItems=3`, "string"},
		{"[]map[string][]T | required=true immutable=true", "[]T"},
		{`float | default=1.5 validation="self > 0"`, "float"},
		{"T | description=x", "T"},
		{strings.Repeat("[]", 20) + "string", "map[string]T"},
		{`string | default="unclosed`, `object | default={`},
		{"boolean | default=true enum=\"true\"", "number"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, field, typ string) {
		spec, _ := json.Marshal(map[string]any{"x": field, "y": map[string]any{"z": field}})
		types, _ := json.Marshal(map[string]any{"T": typ, "U": map[string]any{"a": "T", "b": field}})
		rgd := &krov1a1.ResourceGraphDefinition{Spec: krov1a1.ResourceGraphDefinitionSpec{Schema: &krov1a1.Schema{
			APIVersion: "v1alpha1", Kind: "Fuzz",
			Spec:  runtime.RawExtension{Raw: spec},
			Types: runtime.RawExtension{Raw: types},
		}}}
		crd, err := CRD(rgd)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(e.Path, "spec.schema") {
				t.Fatalf("%q / %q: error without a schema path: %v", field, typ, err)
			}
			return
		}
		if _, err := json.Marshal(crd); err != nil {
			t.Fatalf("%q / %q: the CRD does not marshal: %v", field, typ, err)
		}
	})
}
