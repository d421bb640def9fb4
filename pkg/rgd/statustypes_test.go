package rgd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/cel"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
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
	// The error docs/kro.md quotes.
	const quoted = "spec.schema.status.ready: type check: column 18: undefined field 'availableReplica'"
	if _, err := CRD(decodeRGD(t, statusTypesRGD("Namespaced", "      ready: ${deployment.status.availableReplica}"))); err == nil || err.Error() != quoted {
		t.Errorf("got %v, want %s", err, quoted)
	}
	if page, err := os.ReadFile("../../docs/kro.md"); err != nil || !strings.Contains(string(page), "\n"+quoted+"\n") {
		t.Errorf("docs/kro.md does not quote %q (%v)", quoted, err)
	}
	// A field nested in the status has its full path.
	_, err := CRD(decodeRGD(t, statusTypesRGD("Namespaced", "      a:\n        b.c: ${deployment.spec.replica}")))
	if err == nil || err.Error() != `spec.schema.status.a["b.c"]: type check: column 16: undefined field 'replica'` {
		t.Fatalf("nested: %v", err)
	}
	// What fails without types too is BuildGraph's to report: CRD leaves
	// the field untyped, Compile refuses it with its own rule.
	for src, err := range map[string]string{
		"${nosuch.status}":       "spec.schema.status.f: unknown identifier nosuch",
		"${schema.status.x}":     "spec.schema.status.f: schema.status is not readable",
		"${tag}":                 "spec.schema.status.f: iterator tag is not in scope here",
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

// statusConformance checks instance objects against their CRD's schema as
// the API server does on a status write: nulls of non-nullable fields
// dropped, then nothing pruned (no field the schema lacks) and no
// validation error.
type statusConformance struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func newStatusConformance(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *statusConformance {
	t.Helper()
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	ss, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	return &statusConformance{structural: ss, validator: v}
}

// check returns what the API server would prune or refuse in obj.
func (c *statusConformance) check(obj map[string]any) string {
	obj = runtime.DeepCopyJSON(obj)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	before := runtime.DeepCopyJSON(obj)
	if pruned := structuralpruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(pruned) > 0 {
		return fmt.Sprintf("the API server would prune %v", pruned)
	}
	if !reflect.DeepEqual(before, obj) {
		return "the API server would prune fields"
	}
	if errs := apiservervalidation.ValidateCustomResource(nil, obj, c.validator); len(errs) > 0 {
		return errs.ToAggregate().Error()
	}
	return ""
}

// TestStatusValuesConform: the values the compiled controller writes into
// typed status fields are what their schemas allow (an int64 from CEL an
// integer, a time a date-time string, a quantity and an int-or-string as
// the API has them, objects with no field the schema lacks).
func TestStatusValuesConform(t *testing.T) {
	src := `
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: conform}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Conform
    spec:
      name: string
      replicas: integer | default=2
      ratio: float | default=0.5
      tags: '[]string | default=["a","b"]'
    status:
      replicas: ${deployment.status.replicas}
      twice: ${schema.spec.replicas * 2}
      ratio: ${schema.spec.ratio}
      ready: ${deployment.status.readyReplicas == schema.spec.replicas}
      url: http://${service.spec.clusterIP}
      since: ${timestamp(deployment.metadata.creationTimestamp)}
      created: ${deployment.metadata.creationTimestamp}
      deploymentStatus: ${deployment.status}
      ports: ${service.spec.ports}
      resources: ${deployment.spec.template.spec.containers[0].resources}
      labels: ${deployment.metadata.labels}
      tags: ${schema.spec.tags}
      secretData: ${secret.data}
      spec: ${schema.spec}
      nested:
        cpu: ${deployment.spec.template.spec.containers[0].resources.limits.cpu}
        targetPort: ${service.spec.ports[0].targetPort}
  resources:
    - id: secret
      externalRef:
        apiVersion: v1
        kind: Secret
        metadata: {name: creds}
    - id: deployment
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${schema.spec.name}
          labels: {app: "${schema.spec.name}"}
        spec:
          replicas: ${schema.spec.replicas}
          selector: {matchLabels: {app: "${schema.spec.name}"}}
          template:
            metadata: {labels: {app: "${schema.spec.name}"}}
            spec:
              containers:
                - name: app
                  image: nginx
                  resources:
                    limits: {cpu: 500m, memory: 1Gi}
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${schema.spec.name}"}
        spec:
          clusterIP: 10.0.0.7
          selector: {app: "${schema.spec.name}"}
          ports:
            - {name: http, port: 80, targetPort: http}
            - {name: admin, port: 81, targetPort: 8081}
`
	rgd := decodeRGD(t, src)
	c, err := Compile(rgd)
	if err != nil {
		t.Fatal(err)
	}
	conf := newStatusConformance(t, c.CRD)
	off, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{
		Versions:          map[string]string{"kro.run/Conform": "v1alpha1"},
		StatusSubresource: operator.InputStatusSubresource(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer off.Stop()
	inst := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kro.run/v1alpha1", "kind": "Conform",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "uid-c", "generation": int64(1)},
		// As the API server defaults it.
		"spec": map[string]any{"name": "web", "replicas": int64(2), "ratio": 0.5, "tags": []any{"a", "b"}},
	}}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "creds", "namespace": "ns"},
		"data": map[string]any{"password": "c2VjcmV0"}}}
	if err := off.ApplyAll(ctx, []*unstructured.Unstructured{inst, secret}); err != nil {
		t.Fatal(err)
	}
	// kube-controller-manager's part: the Deployment's creation time and
	// status, as the API server encodes them.
	dep, err := off.Store.Get(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, object.Key{Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	dep = dep.DeepCopy()
	now := metav1.Now()
	dep.SetCreationTimestamp(now)
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
			LastUpdateTime: now, LastTransitionTime: now, Reason: "MinimumReplicasAvailable", Message: "ok"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dep.Object["status"] = st
	if _, err := off.Store.Update(dep); err != nil {
		t.Fatal(err)
	}
	if err := off.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := off.Store.Get(schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "Conform"}, object.Key{Namespace: "ns", Name: "c"})
	if err != nil {
		t.Fatal(err)
	}
	status, _ := got.Object["status"].(map[string]any)
	for _, k := range []string{"replicas", "twice", "ratio", "ready", "url", "since", "created", "deploymentStatus", "ports", "resources", "labels", "tags", "secretData", "spec", "nested"} {
		if status[k] == nil {
			t.Errorf("status.%s not written: %v", k, status)
		}
	}
	if msg := conf.check(got.Object); msg != "" {
		t.Errorf("the status written does not conform to the CRD: %s\n%v", msg, status)
	}
	// The check itself: a value of the wrong type, a field the schema
	// lacks.
	for k, v := range map[string]any{"twice": "4", "url": int64(1), "extra": "x"} {
		bad := runtime.DeepCopyJSON(got.Object)
		bad["status"].(map[string]any)[k] = v
		if conf.check(bad) == "" {
			t.Errorf("status.%s = %v passes the check", k, v)
		}
	}
}

// rgdFuzzConformance holds the conformance check of each fuzz shape's
// instance CRD, by file.
var rgdFuzzConformance sync.Map

// checkRGDStatusConforms fails when an instance of the result of a fuzz
// run holds a status its CRD's typed schema would prune or refuse.
func checkRGDStatusConforms(t *testing.T, fc *rgdFuzzCase, result []map[string]any) {
	t.Helper()
	c, ok := rgdFuzzConformance.Load(fc.shape.file)
	if !ok {
		src, err := os.ReadFile(filepath.Join("testdata", "compile", fc.shape.file+".rgd.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd, err := CRD(decodeRGDTB(t, string(src)))
		if err != nil {
			t.Fatal(err)
		}
		c, _ = rgdFuzzConformance.LoadOrStore(fc.shape.file, newStatusConformance(t, crd))
	}
	for _, m := range result {
		if m["kind"] != fc.instGVK.Kind {
			continue
		}
		if msg := c.(*statusConformance).check(m); msg != "" {
			t.Fatalf("instance %v: the status does not conform to the CRD: %s\n%v", m["metadata"], msg, m["status"])
		}
	}
}

// FuzzStatusTypes: any status expression over statusTypesRGD's variables
// either gives a CRD the API server's validation accepts (CRD checks it)
// or an *Error at a path of the RGD; it never panics.
func FuzzStatusTypes(f *testing.F) {
	for _, s := range []string{"${deployment.status}", "${schema.spec.ports.map(p, p.number)}", "${workers[0].data}",
		"a-${schema.spec.name}-${service.spec.clusterIP}", "${{'a': [deployment.spec.template.spec]}}", "${buckets.filter(b, b.x)}",
		"${optional.of(deployment.status.conditions[0])}", "${deployment.status.nope}", "${secret.data.?x.orValue('')}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		q, _ := json.Marshal(src)
		rgd := &krov1a1.ResourceGraphDefinition{}
		if err := yaml.Unmarshal([]byte(statusTypesRGD("Namespaced", "      f: "+string(q))), rgd); err != nil {
			return
		}
		if _, err := CRD(rgd); err != nil {
			var e *Error
			if !errors.As(err, &e) || !strings.HasPrefix(e.Path, "spec.") {
				t.Fatalf("%q: %v is not an *Error at a path of the RGD", src, err)
			}
		}
	})
}
