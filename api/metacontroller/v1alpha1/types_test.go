package v1alpha1

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// Manifests in the shape Metacontroller's reference documents, using every
// field: they must decode strictly (no unknown field) and survive a round
// trip unchanged.
const compositeYAML = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  generateSelector: false
  resyncPeriodSeconds: 30
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: catsets
    labelSelector:
      matchLabels: {tier: web}
    ignoreStatusChanges: true
    revisionHistory:
      fieldPaths: [spec.template]
  childResources:
    - apiVersion: v1
      resource: pods
      updateStrategy:
        method: RollingRecreate
        statusChecks:
          conditions:
            - type: Ready
              status: "True"
              reason: Up
    - apiVersion: v1
      resource: persistentvolumeclaims
  endpointConfigs:
    - host: hooks.metacontroller:8443
      caBundle:
        configMapRef: {name: ca, namespace: metacontroller}
      basicAuth:
        secretRef: {name: basic, namespace: metacontroller}
        usernameKey: user
        passwordKey: pass
      clientTLS:
        secretRef: {name: client, namespace: metacontroller}
        certKey: crt
        privateKeyKey: key
  hooks:
    customize:
      version: v2
      webhook:
        service: {name: hooks, namespace: metacontroller, port: 8443, protocol: https}
        path: /customize
    sync:
      version: v1
      webhook:
        url: https://hooks.metacontroller:8443/sync
        timeout: 10s
        responseUnMarshallMode: strict
        etag: {enabled: true, cacheTimeoutSeconds: 60, cacheCleanupSeconds: 30}
        caBundle:
          inline: "-----BEGIN CERTIFICATE-----"
        authorization:
          type: Bearer
          secretRef: {name: token, namespace: metacontroller, key: token}
    finalize:
      webhook:
        url: http://hooks.metacontroller/finalize
`

const decoratorYAML = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-pod
spec:
  resyncPeriodSeconds: 10
  resources:
    - apiVersion: apps/v1
      resource: statefulsets
      labelSelector:
        matchExpressions:
          - {key: app, operator: In, values: [web]}
      annotationSelector:
        matchAnnotations: {service-per-pod: "true"}
        matchExpressions:
          - {key: service-per-pod-ports, operator: Exists}
      ignoreStatusChanges: true
  attachments:
    - apiVersion: v1
      resource: services
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: http://service-per-pod.metacontroller/sync-service-per-pod}
    finalize:
      pipeline:
        attachments: []
        finalized: true
`

func TestManifestsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		obj  any
		new  func() any
	}{
		{"CompositeController", compositeYAML, &CompositeController{}, func() any { return &CompositeController{} }},
		{"DecoratorController", decoratorYAML, &DecoratorController{}, func() any { return &DecoratorController{} }},
	} {
		if err := yaml.UnmarshalStrict([]byte(tc.src), tc.obj); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := yaml.Marshal(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		back := tc.new()
		if err := yaml.UnmarshalStrict(out, back); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(back, tc.obj) {
			t.Errorf("%s: round trip differs:\n%s", tc.name, out)
		}
		var generic1, generic2 map[string]any
		_ = yaml.Unmarshal([]byte(tc.src), &generic1)
		_ = yaml.Unmarshal(out, &generic2)
		delete(generic2["metadata"].(map[string]any), "creationTimestamp")
		delete(generic2, "status")
		if !reflect.DeepEqual(generic1, generic2) {
			t.Errorf("%s: fields lost or renamed:\n%s", tc.name, out)
		}
	}
	cc := &CompositeController{}
	_ = yaml.Unmarshal([]byte(compositeYAML), cc)
	if m := cc.Spec.ChildResources[0].UpdateStrategy.Method; m != ChildUpdateRollingRecreate {
		t.Errorf("method %q", m)
	}
	if v := *cc.Spec.Hooks.Customize.Version; v != HookVersionV2 {
		t.Errorf("version %q", v)
	}
	dc := &DecoratorController{}
	_ = yaml.Unmarshal([]byte(decoratorYAML), dc)
	if string(dc.Spec.Hooks.Finalize.Pipeline.Raw) != `{"attachments":[],"finalized":true}` {
		t.Errorf("pipeline %s", dc.Spec.Hooks.Finalize.Pipeline.Raw)
	}
	// A copy is deep.
	cp := cc.DeepCopy()
	cp.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions[0].Type = "X"
	if cc.Spec.ChildResources[0].UpdateStrategy.StatusChecks.Conditions[0].Type != "Ready" {
		t.Error("DeepCopy shares memory")
	}
}
