package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// rgdYAML is an RGD in the shape kro documents, using every field of the
// spec and status: it must decode strictly (no unknown field) and survive
// a round trip unchanged, templates and SimpleSchema included.
const rgdYAML = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata:
  name: web-application
spec:
  schema:
    apiVersion: v1alpha1
    kind: WebApplication
    group: apps.example.com
    scope: Namespaced
    shortNames: [wa]
    categories: [kro]
    metadata:
      labels: {team: platform}
      annotations: {note: generated}
    spec:
      name: string | required=true
      replicas: integer | default=3 minimum=1
      ingress:
        enabled: boolean | default=false
      ports: '[]integer | default=[80]'
    types:
      Container:
        image: string | required=true
    status:
      availableReplicas: ${deployment.status.availableReplicas}
      endpoint:
        host: ${service.spec.clusterIP}
    additionalPrinterColumns:
      - name: Replicas
        type: integer
        jsonPath: .spec.replicas
  resources:
    - id: deployment
      readyWhen:
        - ${deployment.status.availableReplicas == deployment.spec.replicas}
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: ${schema.spec.name}
        spec:
          replicas: ${schema.spec.replicas}
          someFutureField: {kept: [1, 2.5, true, null]}
    - id: ingress
      includeWhen:
        - ${schema.spec.ingress.enabled}
      forEach:
        - port: ${schema.spec.ports}
      template:
        apiVersion: networking.k8s.io/v1
        kind: Ingress
        metadata:
          name: ${schema.spec.name}-${string(port)}
    - id: config
      externalRef:
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: shared
          namespace: platform
    - id: secrets
      externalRef:
        apiVersion: v1
        kind: Secret
        metadata:
          selector:
            matchLabels: {app: web}
status:
  state: Active
  topologicalOrder: [config, secrets, deployment, ingress]
  conditions:
    - type: Ready
      status: "True"
      reason: Ready
      message: all good
      observedGeneration: 2
      lastTransitionTime: "2025-01-01T00:00:00Z"
  resources:
    - id: ingress
      dependencies:
        - id: deployment
`

func TestResourceGraphDefinitionRoundTrip(t *testing.T) {
	rgd := &ResourceGraphDefinition{}
	if err := yaml.UnmarshalStrict([]byte(rgdYAML), rgd); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	out, err := yaml.Marshal(rgd)
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	_ = yaml.Unmarshal([]byte(rgdYAML), &before)
	_ = yaml.Unmarshal(out, &after)
	delete(after["metadata"].(map[string]any), "creationTimestamp")
	if !reflect.DeepEqual(before, after) {
		t.Errorf("round trip changed the RGD:\n%s", out)
	}

	// The decoded fields are where kro's users expect them.
	s := rgd.Spec.Schema
	if s.Kind != "WebApplication" || s.APIVersion != "v1alpha1" || s.Group != "apps.example.com" || s.Scope != ResourceScopeNamespaced {
		t.Errorf("schema identity: %+v", s)
	}
	var spec map[string]any
	if err := json.Unmarshal(s.Spec.Raw, &spec); err != nil || spec["replicas"] != "integer | default=3 minimum=1" {
		t.Errorf("schema.spec: %v %v", spec, err)
	}
	if len(rgd.Spec.Resources) != 4 || rgd.Spec.Resources[1].ForEach[0]["port"] != "${schema.spec.ports}" ||
		rgd.Spec.Resources[3].ExternalRef.Metadata.Selector.MatchLabels["app"] != "web" {
		t.Errorf("resources: %+v", rgd.Spec.Resources)
	}
	if c := rgd.Status.Conditions[0]; c.Type != ConditionReady || *c.Reason != "Ready" || c.ObservedGeneration != 2 {
		t.Errorf("condition: %+v", c)
	}

	// DeepCopy gives an equal, independent object.
	cp := rgd.DeepCopy()
	if !reflect.DeepEqual(cp, rgd) {
		t.Error("DeepCopy differs")
	}
	cp.Spec.Resources[0].Template.Raw[0] = ' '
	if rgd.Spec.Resources[0].Template.Raw[0] == ' ' {
		t.Error("DeepCopy shares the template's bytes")
	}
}
