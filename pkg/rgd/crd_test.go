package rgd

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden CRDs under testdata/")

// decodeRGD decodes an RGD from YAML strictly, as the API server's schema
// would accept it.
func decodeRGD(t *testing.T, y string) *krov1a1.ResourceGraphDefinition {
	t.Helper()
	rgd := &krov1a1.ResourceGraphDefinition{}
	if err := yaml.UnmarshalStrict([]byte(y), rgd); err != nil {
		t.Fatalf("RGD: %v", err)
	}
	return rgd
}

// TestExamples compiles the RGDs under testdata/examples (kro's
// pure-Kubernetes examples and the RGDs of its schema docs, rewritten)
// and compares each CRD with its golden file (CRD has checked each with
// the API server's validation).
func TestExamples(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "examples", "*.rgd.yaml"))
	if len(files) < 8 {
		t.Fatalf("found %d example RGDs", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			crd, err := CRD(decodeRGD(t, string(src)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(crd)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".rgd.yaml") + ".crd.yaml"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("CRD differs from %s (run with -update and review the diff):\n%s", golden, got)
			}
		})
	}
}

// TestCRDShape checks what kro documents of the generated CRD, field by
// field.
func TestCRDShape(t *testing.T) {
	rgd := decodeRGD(t, `
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: application}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Application
    spec:
      name: string | required=true
`)
	crd, err := CRD(rgd)
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "applications.kro.run" || crd.Spec.Group != "kro.run" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("name %s group %s scope %s", crd.Name, crd.Spec.Group, crd.Spec.Scope)
	}
	want := apiextensionsv1.CustomResourceDefinitionNames{Kind: "Application", ListKind: "ApplicationList", Plural: "applications", Singular: "application"}
	if !reflect.DeepEqual(crd.Spec.Names, want) {
		t.Errorf("names %+v", crd.Spec.Names)
	}
	v := crd.Spec.Versions[0]
	if len(crd.Spec.Versions) != 1 || v.Name != "v1alpha1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %+v", v)
	}
	root := v.Schema.OpenAPIV3Schema
	if got := root.Properties["spec"].Required; !reflect.DeepEqual(got, []string{"name"}) {
		t.Errorf("spec.required %v", got)
	}
	status := root.Properties["status"]
	if status.Properties["state"].Type != "string" || status.Properties["conditions"].Items.Schema.Properties["observedGeneration"].Type != "integer" {
		t.Errorf("status %+v", status)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+"="+c.JSONPath)
	}
	if strings.Join(cols, " ") != `State=.status.state Ready=.status.conditions[?(@.type=="Ready")].status Age=.metadata.creationTimestamp` {
		t.Errorf("default columns %v", cols)
	}

	// Group, cluster scope, names, metadata and columns of the RGD.
	rgd = decodeRGD(t, `
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: policy}
spec:
  schema:
    apiVersion: v2beta1
    kind: ClusterPolicy
    group: mycompany.io
    scope: Cluster
    shortNames: [cp]
    categories: [kro, policies]
    metadata:
      labels: {team: platform}
      annotations: {description: Policies}
    additionalPrinterColumns:
      - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    spec:
      replicas: integer | default=1
`)
	crd, err = CRD(rgd)
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "clusterpolicies.mycompany.io" || crd.Spec.Scope != apiextensionsv1.ClusterScoped ||
		crd.Spec.Names.Plural != "clusterpolicies" || crd.Spec.Names.Singular != "clusterpolicy" ||
		!reflect.DeepEqual(crd.Spec.Names.ShortNames, []string{"cp"}) || !reflect.DeepEqual(crd.Spec.Names.Categories, []string{"kro", "policies"}) ||
		crd.Labels["team"] != "platform" || crd.Annotations["description"] != "Policies" ||
		len(crd.Spec.Versions[0].AdditionalPrinterColumns) != 1 || crd.Spec.Versions[0].Name != "v2beta1" {
		t.Errorf("CRD %+v", crd)
	}
	// The CRD owns its labels: changing it leaves the RGD alone.
	crd.Labels["team"] = "x"
	if rgd.Spec.Schema.Metadata.Labels["team"] != "platform" {
		t.Error("the CRD shares the RGD's label map")
	}
	ik, err := Instance(rgd.Spec.Schema)
	if err != nil || ik.Resource().String() != "mycompany.io/v2beta1, Resource=clusterpolicies" || ik.Namespaced {
		t.Errorf("instance kind %+v %v", ik, err)
	}
}

func TestStatusSchema(t *testing.T) {
	for _, tc := range []struct {
		name, status, want, err string
	}{{
		name: "fields, nested, lists and templates",
		status: `
availableReplicas: ${deployment.status.availableReplicas}
endpoint: "http://${service.status.loadBalancer.ingress[0].hostname}"
connection:
  host: ${service.spec.clusterIP}
  protocol: "${'TCP'}"
endpoints:
  - ${service.status.loadBalancer.ingress[0].hostname}
  - ${service.status.loadBalancer.ingress[1].hostname}`,
		want: `type: object
properties:
  availableReplicas: {x-kubernetes-preserve-unknown-fields: true}
  endpoint: {x-kubernetes-preserve-unknown-fields: true}
  connection:
    type: object
    properties:
      host: {x-kubernetes-preserve-unknown-fields: true}
      protocol: {x-kubernetes-preserve-unknown-fields: true}
  endpoints: {x-kubernetes-preserve-unknown-fields: true}
  state: {type: string}
  conditions: ` + conditionsYAML,
	}, {
		name: "state and conditions are kro's",
		status: `
state: ${deployment.status.phase}
conditions:
  - "${runtime.newCondition({type: 'AppReady', status: 'True', reason: 'R', message: ''})}"`,
		want: "{type: object, properties: {state: {type: string}, conditions: " + conditionsYAML + "}}",
	}, {
		name: "no status",
		want: "{type: object, properties: {state: {type: string}, conditions: " + conditionsYAML + "}}",
	},
		{name: "a constant", status: "{protocol: TCP}", err: `spec.schema.status.protocol: a status field must hold a ${...} expression, got the string "TCP"`},
		{name: "a number", status: "{a: {b: 5}}", err: "spec.schema.status.a.b: a status field must hold a ${...} expression, got the number 5"},
		{name: "conditions not a list", status: "conditions: ${x}", err: `spec.schema.status.conditions: conditions must be a list of ${...} expressions, got the string "${x}"`},
		{name: "a condition not an expression", status: "{conditions: [{type: Ready}]}", err: "spec.schema.status.conditions[0]: a condition must be a ${...} expression, got a map"},
		{name: "status not a map", status: "[a]", err: "spec.schema.status: must be a map of fields, got a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StatusSchema(raw(t, tc.status), nil)
			if tc.err != "" {
				var e *Error
				if err == nil || err.Error() != tc.err || !errors.As(err, &e) {
					t.Fatalf("want *Error %q, got %v", tc.err, err)
				}
				return
			}
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

const conditionsYAML = `{type: array, items: {type: object, properties: {type: {type: string}, status: {type: string}, reason: {type: string},
  message: {type: string}, lastTransitionTime: {type: string}, observedGeneration: {type: integer}}}}`

func TestInstanceErrors(t *testing.T) {
	for _, tc := range []struct{ schema, err string }{
		{"{apiVersion: v1alpha1}", `spec.schema.kind: kind "" must be UpperCamelCase`},
		{"{apiVersion: v1alpha1, kind: webApp}", `spec.schema.kind: kind "webApp" must be UpperCamelCase`},
		{"{apiVersion: v1alpha1, kind: Web-App}", `spec.schema.kind: kind "Web-App" must be UpperCamelCase`},
		{"{apiVersion: apps/v1, kind: WebApp}", `spec.schema.apiVersion: apiVersion "apps/v1" must be a Kubernetes version`},
		{"{apiVersion: v1gamma1, kind: WebApp}", `spec.schema.apiVersion: apiVersion "v1gamma1" must be a Kubernetes version`},
		{"{apiVersion: v1, kind: WebApp, group: example}", `spec.schema.group: group "example" must be a DNS subdomain with at least one dot`},
		{"{apiVersion: v1, kind: WebApp, group: Example.com}", `spec.schema.group: group "Example.com" must be a DNS subdomain`},
		{"{apiVersion: v1, kind: WebApp, scope: Global}", `spec.schema.scope: scope "Global" must be Namespaced or Cluster`},
		{"{apiVersion: v1, kind: WebApp, spec: {a: strin}}", `spec.schema.spec.a: unknown type "strin"`},
		{"{apiVersion: v1, kind: WebApp, status: {a: b}}", `spec.schema.status.a: a status field must hold a ${...} expression`},
		// What the API server's CRD validation refuses, at the field's path.
		{`{apiVersion: v1, kind: A, spec: {a: 'string | pattern="^x$" default=y'}}`,
			`spec.schema.spec.a: the API server would refuse the generated CRD: default: Invalid value: "y"`},
		{`{apiVersion: v1, kind: A, spec: {a: 'integer | enum="1,2" default=3'}}`,
			`spec.schema.spec.a: the API server would refuse the generated CRD: default: Unsupported value: 3`},
		{`{apiVersion: v1, kind: A, spec: {a: 'string | validation="self.foo("'}}`,
			`spec.schema.spec.a: the API server would refuse the generated CRD: x-kubernetes-validations[0].rule: Invalid value`},
		{`{apiVersion: v1, kind: A, types: {C: {name: string}}, spec: {b: {a: '[]C | listType=map listMapKey=name'}}}`,
			`spec.schema.spec.b.a: the API server would refuse the generated CRD: items.properties[name].default: Required value`},
		{`{apiVersion: v1, kind: A, shortNames: [Bad_Name]}`, `spec.schema: the API server would refuse the generated CRD: spec.names.shortNames[0]`},
	} {
		rgd := decodeRGD(t, "spec: {schema: "+tc.schema+"}")
		if _, err := CRD(rgd); err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s: want %q, got %v", tc.schema, tc.err, err)
		}
	}
	if _, err := CRD(&krov1a1.ResourceGraphDefinition{}); err == nil || err.Error() != "spec.schema: schema is required" {
		t.Errorf("no schema: %v", err)
	}
}
