package rgd

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// raw turns YAML into the raw JSON an RGD's schema parts hold.
func raw(t *testing.T, y string) runtime.RawExtension {
	t.Helper()
	if y == "" {
		return runtime.RawExtension{}
	}
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("test YAML: %v", err)
	}
	return runtime.RawExtension{Raw: j}
}

// generic renders v (a schema, or YAML text) in the JSON data model, to
// compare schemas by their JSON.
func generic(t *testing.T, v any) any {
	t.Helper()
	var j []byte
	var err error
	if s, ok := v.(string); ok {
		j, err = yaml.YAMLToJSON([]byte(s))
	} else {
		j, err = json.Marshal(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The cases follow kro's SimpleSchema reference and schema docs: each
// documented type and marker, and the errors they document.
func TestSpecSchema(t *testing.T) {
	for _, tc := range []struct {
		name, spec, types string
		want              string // YAML of the spec schema
		err               string // else: the error, path included
	}{{
		name: "basic types",
		spec: "{name: string, age: integer, enabled: boolean, price: float, ratio: number}",
		want: `type: object
properties:
  name: {type: string}
  age: {type: integer}
  enabled: {type: boolean}
  price: {type: number}
  ratio: {type: number}`,
	}, {
		name: "nested structures, arrays and maps",
		spec: `
user:
  name: string
  address:
    street: string
  contacts: "[]string"
labels: "map[string]string"
matrix: "[][]integer"
tags: "map[string][]string"
configs: "[]map[string]string"
values: object`,
		want: `type: object
properties:
  user:
    type: object
    properties:
      name: {type: string}
      address: {type: object, properties: {street: {type: string}}}
      contacts: {type: array, items: {type: string}}
  labels: {type: object, additionalProperties: {type: string}}
  matrix: {type: array, items: {type: array, items: {type: integer}}}
  tags: {type: object, additionalProperties: {type: array, items: {type: string}}}
  configs: {type: array, items: {type: object, additionalProperties: {type: string}}}
  values: {type: object, x-kubernetes-preserve-unknown-fields: true}`,
	}, {
		name: "required, defaults and the object default kro adds",
		spec: `
name: string | required=true
replicas: integer | default=3 minimum=1 maximum=100
ingress:
  enabled: boolean | default=false
  host: string | default="example.com"
  path: string | default="/"
env: "map[string]string"
ports: "[]integer | default=[80]"`,
		want: `type: object
required: [name]
properties:
  name: {type: string}
  replicas: {type: integer, default: 3, minimum: 1, maximum: 100}
  ingress:
    type: object
    default: {}
    properties:
      enabled: {type: boolean, default: false}
      host: {type: string, default: example.com}
      path: {type: string, default: /}
  env: {type: object, additionalProperties: {type: string}}
  ports: {type: array, items: {type: integer}, default: [80]}`,
	}, {
		name: "an object without required fields gets default {}",
		spec: `{a: "integer | default=1", b: {c: "string | default=x"}}`,
		want: `type: object
default: {}
properties:
  a: {type: integer, default: 1}
  b: {type: object, default: {}, properties: {c: {type: string, default: x}}}`,
	}, {
		name: "string markers",
		spec: `
email: string | pattern="^[\\w\\.-]+@[\\w\\.-]+\\.\\w+$" required=true
username: string | minLength=3 maxLength=15 pattern="^[a-zA-Z0-9_]+$"
mode: string | enum="debug,info,warn,error" default="info"
code: integer | enum="1, 2,3"
id: string | immutable=true description="Unique identifier"
even: integer | validation="self % 2 == 0"`,
		want: `type: object
required: [email]
properties:
  email: {type: string, pattern: '^[\w\.-]+@[\w\.-]+\.\w+$'}
  username: {type: string, minLength: 3, maxLength: 15, pattern: '^[a-zA-Z0-9_]+$'}
  mode: {type: string, enum: [debug, info, warn, error], default: info}
  code: {type: integer, enum: [1, 2, 3]}
  id:
    type: string
    description: Unique identifier
    x-kubernetes-validations: [{rule: self == oldSelf, message: field is immutable}]
  even:
    type: integer
    x-kubernetes-validations: [{rule: self % 2 == 0, message: validation failed}]`,
	}, {
		name: "array markers",
		types: `
Container:
  name: string | required=true
  port: integer | required=true`,
		spec: `
tags: '[]string | uniqueItems=true minItems=1 maxItems=10 description="1-10 unique tags"'
comments: '[]string | uniqueItems=false maxItems=50'
containers: '[]Container | listType=map listMapKey=name listMapKey=port'`,
		want: `type: object
properties:
  tags: {type: array, items: {type: string}, x-kubernetes-list-type: set, minItems: 1, maxItems: 10, description: 1-10 unique tags}
  comments: {type: array, items: {type: string}, maxItems: 50}
  containers:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name, port]
    items:
      type: object
      required: [name, port]
      properties:
        name: {type: string}
        port: {type: integer}`,
	}, {
		name: "custom types, used in lists and maps, and by each other",
		types: `
Address: {street: string, city: string}
Company: {name: string, headquarters: Address}
Employee: {name: string, company: Company}
myType:
  value1: string | required=true
  value2: integer | default=42
Name: string | required=true minLength=1`,
		spec: `
ceo: Employee
env: "map[string]myType"
people: "[]Address | required=true"
owner: Name | description="who"`,
		want: `type: object
required: [owner, people]
properties:
  ceo:
    type: object
    properties:
      name: {type: string}
      company:
        type: object
        properties:
          name: {type: string}
          headquarters: {type: object, properties: {street: {type: string}, city: {type: string}}}
  env:
    type: object
    additionalProperties:
      type: object
      required: [value1]
      properties:
        value1: {type: string}
        value2: {type: integer, default: 42}
  people: {type: array, items: {type: object, properties: {street: {type: string}, city: {type: string}}}}
  owner: {type: string, minLength: 1, description: who}`,
	}, {
		name:  "a custom type may be called number",
		types: "{number: {n: integer}}",
		spec:  "{x: number}",
		want:  "{type: object, properties: {x: {type: object, properties: {n: {type: integer}}}}}",
	}, {
		name: "no spec",
		want: "{type: object}",
	},
		// Errors, each at its path.
		{name: "unknown type", spec: "{replicas: strin}", err: `spec.schema.spec.replicas: unknown type "strin"`},
		{name: "unknown element type", spec: `{a: {b: "[]strin"}}`, err: `spec.schema.spec.a.b: unknown type "strin"`},
		{name: "odd key", spec: `{"my-field": "strin"}`, err: `spec.schema.spec["my-field"]: unknown type "strin"`},
		{name: "unknown marker", spec: "{a: string | requird=true}", err: `spec.schema.spec.a: unknown marker "requird"`},
		{name: "not a type", spec: "{a: 5}", err: "spec.schema.spec.a: a field must be a type string or a map of fields, got the number 5"},
		{name: "null field", spec: "{a: }", err: "spec.schema.spec.a: a field must be a type string or a map of fields, got null"},
		{name: "spec not a map", spec: "[a]", err: "spec.schema.spec: must be a map of fields, got a list"},
		{name: "bad integer default", spec: "{a: integer | default=three}", err: `spec.schema.spec.a: marker default: want an integer, got "three"`},
		{name: "bad boolean default", spec: "{a: boolean | default=yes}", err: `spec.schema.spec.a: marker default: want true or false, got "yes"`},
		{name: "non-finite default", spec: "{a: float | default=NaN}", err: `spec.schema.spec.a: marker default: want a finite number, got "NaN"`},
		{name: "list default not a list", spec: `{a: "[]string | default=x"}`, err: `spec.schema.spec.a: marker default: want a JSON value, got "x"`},
		{name: "map default a list", spec: `{a: "map[string]string | default=[1]"}`, err: `spec.schema.spec.a: marker default: a list is no default for an object`},
		{name: "bad required", spec: "{a: string | required=maybe}", err: `spec.schema.spec.a: marker required: want true or false, got "maybe"`},
		{name: "bad minimum", spec: "{a: integer | minimum=low}", err: `spec.schema.spec.a: marker minimum: want a finite number, got "low"`},
		{name: "enum on a boolean", spec: `{a: boolean | enum="true"}`, err: "spec.schema.spec.a: marker enum: applies to strings and integers, not a boolean"},
		{name: "empty enum value", spec: `a: string | enum="a,,b"`, err: `spec.schema.spec.a: marker enum: empty value in "a,,b"`},
		{name: "integer enum", spec: `a: integer | enum="1,x"`, err: `spec.schema.spec.a: marker enum: want an integer, got "x"`},
		{name: "pattern on an integer", spec: `{a: integer | pattern="^1$"}`, err: "spec.schema.spec.a: marker pattern: applies to strings, not an integer"},
		{name: "bad pattern", spec: `{a: string | pattern="(("}`, err: "spec.schema.spec.a: marker pattern: invalid regular expression"},
		{name: "minLength on a list", spec: `{a: "[]string | minLength=1"}`, err: "spec.schema.spec.a: marker minLength: applies to strings, not a list"},
		{name: "negative maxItems", spec: `{a: "[]string | maxItems=-1"}`, err: `spec.schema.spec.a: marker maxItems: want a non-negative integer, got "-1"`},
		{name: "uniqueItems on a map", spec: `{a: "map[string]string | uniqueItems=true"}`, err: "spec.schema.spec.a: marker uniqueItems: applies to lists, not a map"},
		{name: "bad listType", spec: `{a: "[]string | listType=bag"}`, err: `spec.schema.spec.a: marker listType: want atomic, set or map, got "bag"`},
		{name: "unique and map list", spec: `{a: "[]string | uniqueItems=true listType=map"}`, err: "spec.schema.spec.a: marker listType: listType map contradicts the list's listType set"},
		{name: "listMapKey without map", spec: `{a: "[]string | listMapKey=name"}`, err: "spec.schema.spec.a: listMapKey needs listType=map"},
		{name: "duplicate listMapKey", spec: `{a: "[]string | listType=map listMapKey=n listMapKey=n"}`, err: `spec.schema.spec.a: marker listMapKey: duplicate key "n"`},
		{name: "empty validation", spec: `{a: string | validation=""}`, err: "spec.schema.spec.a: marker validation: empty CEL rule"},
		{name: "type cycle", types: "{Person: {employer: Company}, Company: {employees: '[]Person'}}", spec: "{p: Person}",
			err: "spec.schema.types.Company: custom types form a cycle: Company -> Person -> Company"},
		{name: "self cycle", types: "{Node: {next: Node}}", err: "spec.schema.types.Node: custom types form a cycle: Node -> Node"},
		{name: "error in a type", types: "{T: {a: strin}}", spec: "{x: T}", err: `spec.schema.types.T.a: unknown type "strin"`},
		{name: "type not a type", types: "{T: [a]}", err: "spec.schema.types.T: a type must be a type string or a map of fields, got a list"},
		{name: "exponential types", types: expTypes(25), spec: "{x: T25}", err: "exceeds 20000 schema nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SpecSchema(raw(t, tc.spec), raw(t, tc.types))
			if tc.err != "" {
				var e *Error
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &e) {
					t.Fatalf("want *Error %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := generic(t, got), generic(t, tc.want); !reflect.DeepEqual(g, w) {
				gy, _ := yaml.Marshal(g)
				wy, _ := yaml.Marshal(w)
				t.Errorf("got:\n%s\nwant:\n%s", gy, wy)
			}
		})
	}
}

// expTypes defines T0..Tn, each Ti with two fields of type Ti-1: Tn expands
// to 2^n copies of T0.
func expTypes(n int) string {
	var b strings.Builder
	b.WriteString("{T0: {leaf: string}")
	for i := 1; i <= n; i++ {
		p := "T" + strconv.Itoa(i-1)
		b.WriteString(", T" + strconv.Itoa(i) + ": {a: " + p + ", b: " + p + "}")
	}
	b.WriteString("}")
	return b.String()
}
