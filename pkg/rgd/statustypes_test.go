package rgd

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// statusTypesRGD is an RGD with a status field per case: every kind of
// variable (schema, a built-in kind, a custom kind, collections of both)
// and every CEL type the mapping knows.
func statusTypesRGD(scope, status string) string {
	return `
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: types}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Typed
    scope: ` + scope + `
    types:
      Port: {name: string, number: integer}
    spec:
      name: string | required=true
      replicas: integer | default=1 minimum=1
      ratio: float
      enabled: boolean | default=true
      tags: '[]string'
      labels: map[string]string
      anything: object
      ports: '[]Port'
      nested:
        level: 'string | enum="a,b" default=a'
        count: integer | immutable=true
    status:
` + status + `
  resources:
    - id: deployment
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: "${schema.spec.name}"}
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${schema.spec.name}"}
    - id: secret
      externalRef:
        apiVersion: v1
        kind: Secret
        metadata: {name: creds}
    - id: bucket
      template:
        apiVersion: storage.example.com/v1
        kind: Bucket
        metadata: {name: "${schema.spec.name}"}
    - id: workers
      forEach:
        - tag: ${schema.spec.tags}
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name}-${tag}"}
    - id: buckets
      externalRef:
        apiVersion: storage.example.com/v1
        kind: Bucket
        metadata:
          selector: {matchLabels: {team: a}}
`
}

// statusField returns the schema CRD generates for status field "f" of
// expression src in statusTypesRGD (namespaced).
func statusField(t *testing.T, src string) (*apiextensionsv1.JSONSchemaProps, error) {
	t.Helper()
	q, _ := json.Marshal(src)
	crd, err := CRD(decodeRGD(t, statusTypesRGD("Namespaced", "      f: "+string(q))))
	if err != nil {
		return nil, err
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["f"]
	return &s, nil
}

// TestStatusFieldTypes: each status expression's CEL type becomes its
// field's schema (kro's mapping: pkg/graph/schema in kro), and the CRD
// stays valid for the API server (CRD validates it).
func TestStatusFieldTypes(t *testing.T) {
	const anyValue = "{x-kubernetes-preserve-unknown-fields: true}"
	for _, tc := range []struct{ src, want string }{
		// Scalars.
		{"${deployment.status.availableReplicas}", "{type: integer}"},
		{"${schema.spec.replicas * 2}", "{type: integer}"},
		{"${uint(schema.spec.replicas)}", "{type: integer}"},
		{"${schema.spec.ratio}", "{type: number}"},
		{"${schema.spec.enabled && deployment.spec.paused}", "{type: boolean}"},
		{"${schema.spec.name}", "{type: string}"},
		{"${schema.metadata.name}", "{type: string}"},
		{"${schema.kind}", "{type: string}"},
		// A string template is a string.
		{`"http://${service.spec.clusterIP}:${string(schema.spec.replicas)}"`, "{type: string}"},
		// Times and quantities are typed as the strings they are in JSON.
		{"${deployment.metadata.creationTimestamp}", "{type: string}"},
		{"${timestamp(deployment.metadata.creationTimestamp)}", "{type: string, format: date-time}"},
		{"${duration('90s')}", "{type: string}"},
		{"${deployment.spec.template.spec.containers[0].resources.limits.cpu}", "{type: string}"},
		{"${b'abc'}", "{type: string, format: byte}"},
		// Optionals are their value's type.
		{"${deployment.status.?availableReplicas.orValue(0)}", "{type: integer}"},
		{"${deployment.status.?availableReplicas}", "{type: integer}"},
		// Lists, maps, objects.
		{"${schema.spec.tags}", "{type: array, items: {type: string}}"},
		{"${schema.spec.labels}", "{type: object, additionalProperties: {type: string}}"},
		{"${schema.metadata.labels}", "{type: object, additionalProperties: {type: string}}"},
		// A list's or map's schema is its CEL type's: a Secret's data is a
		// map(string, string) of base64 text.
		{"${secret.data}", "{type: object, additionalProperties: {type: string}}"},
		{"${{'a': deployment.status.replicas}}", "{type: object, additionalProperties: {type: integer}}"},
		{"${[schema.spec.replicas, 2]}", "{type: array, items: {type: integer}}"},
		{"${schema.spec.ports}", "{type: array, items: {type: object, properties: {name: {type: string}, number: {type: integer}}}}"},
		// The spec's shape only: no default, enum, rule or required.
		{"${schema.spec.nested}", "{type: object, properties: {level: {type: string}, count: {type: integer}}}"},
		{"${deployment.spec.selector}", `{type: object, properties: {
			matchLabels: {type: object, additionalProperties: {type: string}},
			matchExpressions: {type: array, items: {type: object, properties: {
				key: {type: string}, operator: {type: string}, values: {type: array, items: {type: string}}}}}}}`},
		{"${deployment.spec.template.spec.containers[0].resources.limits}", "{type: object, additionalProperties: {type: string}}"},
		{"${deployment.spec.template.spec.containers[0].resources}", `{type: object, properties: {
			limits: {type: object, additionalProperties: {x-kubernetes-int-or-string: true}},
			requests: {type: object, additionalProperties: {x-kubernetes-int-or-string: true}},
			claims: {type: array, items: {type: object, properties: {name: {type: string}, request: {type: string}}}}}}`},
		{"${service.spec.ports.map(p, p.targetPort)}", "{type: array, items: " + anyValue + "}"},
		// Collections are lists.
		{"${workers.map(w, w.metadata.name)}", "{type: array, items: {type: string}}"},
		{"${size(workers)}", "{type: integer}"},
		{"${workers.map(w, w.data)}", "{type: array, items: {type: object, additionalProperties: {type: string}}}"},
		// What is dyn keeps any value: a custom kind (no schema offline),
		// an int-or-string, a SimpleSchema object, a map of dyn.
		{"${bucket.status.url}", anyValue},
		{"${bucket}", anyValue},
		{"${buckets}", "{type: array, items: " + anyValue + "}"},
		{"${buckets.map(b, b.metadata.name)}", "{type: array, items: " + anyValue + "}"},
		{"${service.spec.ports[0].targetPort}", anyValue},
		{"${schema.spec.anything}", anyValue},
		{"${{'a': bucket.spec}}", "{type: object, x-kubernetes-preserve-unknown-fields: true}"},
		{"${deployment.status.availableReplicas > 0 ? 'up' : bucket.status.phase}", anyValue},
		// An opaque value (no JSON form; the evaluation fails) keeps any value.
		{"${quantity(deployment.spec.template.spec.containers[0].resources.limits.cpu)}", anyValue},
	} {
		t.Run(tc.src, func(t *testing.T) {
			got, err := statusField(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := generic(t, got), generic(t, tc.want); !reflect.DeepEqual(g, w) {
				gy, _ := yaml.Marshal(g)
				t.Errorf("got:\n%s", gy)
			}
		})
	}
}

// TestStatusFieldObject: a whole object of a built-in kind gets the schema
// of its Go type, with times as date-time strings and int-or-string where
// the API has them.
func TestStatusFieldObject(t *testing.T) {
	got, err := statusField(t, "${deployment.status}")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"availableReplicas":                   "integer",
		"conditions.items.lastUpdateTime":     "string/date-time",
		"conditions.items.status":             "string",
		"observedGeneration":                  "integer",
		"collisionCount":                      "integer",
		"conditions.items":                    "object",
		"conditions":                          "array",
		"conditions.items.lastTransitionTime": "string/date-time",
		"conditions.items.reason":             "string",
		"conditions.items.message":            "string",
		"conditions.items.type":               "string",
		"readyReplicas":                       "integer",
		"replicas":                            "integer",
		"unavailableReplicas":                 "integer",
		"updatedReplicas":                     "integer",
		"terminatingReplicas":                 "integer",
	} {
		s := got
		for _, k := range strings.Split(path, ".") {
			if k == "items" && s.Items != nil {
				s = s.Items.Schema
				continue
			}
			p, ok := s.Properties[k]
			if !ok {
				t.Fatalf("%s: no property %s", path, k)
			}
			s = &p
		}
		typ := s.Type
		if s.Format != "" {
			typ += "/" + s.Format
		}
		if typ != want {
			t.Errorf("%s: %s, want %s", path, typ, want)
		}
	}
	ports, err := statusField(t, "${service.spec.ports[0]}")
	if err != nil {
		t.Fatal(err)
	}
	if tp := ports.Properties["targetPort"]; !tp.XIntOrString || tp.Type != "" {
		t.Errorf("targetPort %+v, want int-or-string", tp)
	}
	// A whole Deployment: metadata, the pod template; the CRD is valid.
	if _, err := statusField(t, "${deployment}"); err != nil {
		t.Fatal(err)
	}
}

// TestStatusTypeErrors: what the type check refuses, at the field's path.
func TestStatusTypeErrors(t *testing.T) {
	for _, tc := range []struct{ scope, src, err string }{
		{"Namespaced", "${deployment.status.availableReplica}",
			"spec.schema.status.f: type check: column 18: undefined field 'availableReplica'"},
		{"Namespaced", "${schema.spec.nme}", "spec.schema.status.f: type check: column 12: undefined field 'nme'"},
		{"Namespaced", "${workers[0].spec}", "spec.schema.status.f: type check: column 11: undefined field 'spec'"},
		{"Namespaced", "${secret.data.password + 1}", "spec.schema.status.f: type check: column 22: found no matching overload for '_+_' applied to '(string, int)'"},
		{"Namespaced", `"replicas: ${deployment.status.replicas}"`, "spec.schema.status.f: type check: column 14: found no matching overload for '_+_' applied to '(string, int)'"},
		// A cluster-scoped instance has no namespace (kro's rule).
		{"Cluster", "${schema.metadata.namespace}", "spec.schema.status.f: type check: column 16: undefined field 'namespace'"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			_, err := CRD(decodeRGD(t, statusTypesRGD(tc.scope, "      f: "+tc.src)))
			var e *Error
			if err == nil || err.Error() != tc.err || !errors.As(err, &e) {
				t.Fatalf("want *Error %q, got %v", tc.err, err)
			}
		})
	}
	// A field nested in the status has its full path.
	_, err := CRD(decodeRGD(t, statusTypesRGD("Namespaced", "      a:\n        b.c: ${deployment.spec.replica}")))
	if err == nil || err.Error() != `spec.schema.status.a["b.c"]: type check: column 16: undefined field 'replica'` {
		t.Fatalf("nested: %v", err)
	}
	// What fails without types too is BuildGraph's to report: CRD leaves
	// the field untyped, Compile refuses it with its own rule.
	for src, err := range map[string]string{
		"${nosuch.status}":     "spec.schema.status.f: unknown identifier nosuch",
		"${schema.status.x}":   "spec.schema.status.f: schema.status is not readable",
		"${tag}":               "spec.schema.status.f: iterator tag is not in scope here",
		"${deployment.status.+}": "spec.schema.status.f: CEL syntax",
	} {
		rgd := decodeRGD(t, statusTypesRGD("Namespaced", "      f: "+src))
		crd, cerr := CRD(rgd)
		if cerr != nil {
			t.Errorf("%s: CRD: %v", src, cerr)
			continue
		}
		if f := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["f"]; f.XPreserveUnknownFields == nil {
			t.Errorf("%s: typed %+v", src, f)
		}
		if _, cerr := Compile(rgd); cerr == nil || !strings.HasPrefix(cerr.Error(), err) {
			t.Errorf("%s: Compile: want %q, got %v", src, err, cerr)
		}
	}
}

// TestSchemaOfType: the mapping of the CEL types no expression above
// yields.
func TestSchemaOfType(t *testing.T) {
	st := &statusTyper{}
	for _, tc := range []struct {
		t    *cel.Type
		want string
	}{
		{cel.NullType, "{x-kubernetes-preserve-unknown-fields: true}"},
		{cel.MapType(cel.IntType, cel.StringType), "{x-kubernetes-preserve-unknown-fields: true}"},
		{cel.ObjectType("no.such.Type"), "{x-kubernetes-preserve-unknown-fields: true}"},
		{cel.TypeParamType("T"), "{x-kubernetes-preserve-unknown-fields: true}"},
		{nil, "{x-kubernetes-preserve-unknown-fields: true}"},
		{cel.ListType(cel.ListType(cel.DoubleType)), "{type: array, items: {type: array, items: {type: number}}}"},
	} {
		if g, w := generic(t, st.schemaOf(tc.t)), generic(t, tc.want); !reflect.DeepEqual(g, w) {
			t.Errorf("%v: got %v", tc.t, g)
		}
	}
}
