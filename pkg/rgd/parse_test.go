package rgd

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseField(t *testing.T) {
	atomic := func(n string) *ssType { return &ssType{kind: kindAtomic, name: n} }
	for _, tc := range []struct {
		in      string
		typ     *ssType
		markers []marker
		err     string
	}{
		{in: "string", typ: atomic("string")},
		{in: "  integer  ", typ: atomic("integer")},
		{in: "float", typ: atomic("number")},
		{in: "boolean", typ: atomic("boolean")},
		{in: "object", typ: &ssType{kind: kindObject}},
		{in: "[]string", typ: &ssType{kind: kindSlice, elem: atomic("string")}},
		{in: "[][]integer", typ: &ssType{kind: kindSlice, elem: &ssType{kind: kindSlice, elem: atomic("integer")}}},
		{in: "map[string][]string", typ: &ssType{kind: kindMap, elem: &ssType{kind: kindSlice, elem: atomic("string")}}},
		{in: "[]map[string]Person", typ: &ssType{kind: kindSlice, elem: &ssType{kind: kindMap, elem: &ssType{kind: kindNamed, name: "Person"}}}},
		{in: "Person", typ: &ssType{kind: kindNamed, name: "Person"}},
		// Markers: unquoted, quoted (spaces, escapes), JSON with spaces.
		{in: "string | required=true default=nginx", typ: atomic("string"),
			markers: []marker{{"required", "true"}, {"default", "nginx"}}},
		{in: `string | description="The name of it" default="a b"`, typ: atomic("string"),
			markers: []marker{{"description", "The name of it"}, {"default", "a b"}}},
		{in: `string | default="say \"hi\"" description="back\\slash \d"`, typ: atomic("string"),
			markers: []marker{{"default", `say "hi"`}, {"description", `back\slash \d`}}},
		{in: `string|enum="a,b, c"`, typ: atomic("string"), markers: []marker{{"enum", "a,b, c"}}},
		{in: `map[string]string | default={"k8s-app": "kube-dns", "a": "\"true\""}`, typ: &ssType{kind: kindMap, elem: atomic("string")},
			markers: []marker{{"default", `{"k8s-app": "kube-dns", "a": "\"true\""}`}}},
		{in: `[]string | default=["a", "b c"] minItems=1`, typ: &ssType{kind: kindSlice, elem: atomic("string")},
			markers: []marker{{"default", `["a", "b c"]`}, {"minItems", "1"}}},
		{in: `string | pattern="^[a-z]{2,3}$"`, typ: atomic("string"), markers: []marker{{"pattern", "^[a-z]{2,3}$"}}},
		{in: `string | pattern=^[a-z]+$`, typ: atomic("string"), markers: []marker{{"pattern", "^[a-z]+$"}}},
		{in: `string | validation="self.size() > 2 && self != 'x y'"`, typ: atomic("string"),
			markers: []marker{{"validation", "self.size() > 2 && self != 'x y'"}}},
		{in: "[]C | listType=map listMapKey=name listMapKey=port", typ: &ssType{kind: kindSlice, elem: &ssType{kind: kindNamed, name: "C"}},
			markers: []marker{{"listType", "map"}, {"listMapKey", "name"}, {"listMapKey", "port"}}},
		{in: "string |", typ: atomic("string")},
		// Errors.
		{in: "", err: "empty type"},
		{in: " | required=true", err: "empty type"},
		{in: "[]", err: "missing element type"},
		{in: "map[int]string", err: "map keys must be string"},
		{in: "map[string]", err: "missing element type"},
		{in: "strin g", err: "malformed type"},
		{in: strings.Repeat("[]", 17) + "string", err: "nested more than 16"},
		{in: "string | required", err: `marker "required" has no value`},
		{in: "string | frobnicate=1", err: `unknown marker "frobnicate"`},
		{in: "string | Required=true", err: `unknown marker "Required"`},
		{in: "string | =1", err: "marker without a name"},
		{in: `string | description="open`, err: "unclosed quote"},
		{in: `object | default={"a": 1`, err: "unclosed bracket"},
		{in: `object | default=}`, err: "unmatched"},
	} {
		f, err := parseField(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: want error %q, got %v", tc.in, tc.err, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(f.typ, tc.typ) || !reflect.DeepEqual(f.markers, tc.markers) {
			t.Errorf("%q: got %+v %+v, want %+v %+v", tc.in, f.typ, f.markers, tc.typ, tc.markers)
		}
	}
}
