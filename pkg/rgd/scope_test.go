package rgd

import (
	"testing"
)

// TestTemplateScope: kro's rules on metadata.namespace, at compile time
// with the resource's path: with a cluster-scoped instance kind, a
// namespaced template (or externalRef by name) must set one; a
// cluster-scoped kind must not.
func TestTemplateScope(t *testing.T) {
	rgd := func(scope, res string) string {
		return `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: scoped}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Scoped
    scope: ` + scope + `
    spec: {name: string}
  resources:
    - id: r
` + res
	}
	for _, tc := range []struct {
		scope, res, wantErr string
	}{
		{"Cluster", "      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n",
			"spec.resources[0].template.metadata: ConfigMap is namespaced and must set metadata.namespace: the instance kind is cluster-scoped (spec.schema.scope: Cluster)"},
		{"Cluster", "      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: ''}}\n",
			"spec.resources[0].template.metadata: ConfigMap is namespaced and must set metadata.namespace: the instance kind is cluster-scoped (spec.schema.scope: Cluster)"},
		{"Cluster", "      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: '${schema.spec.name}'}}\n", ""},
		{"Cluster", "      template: {apiVersion: v1, kind: Namespace, metadata: {name: x}}\n", ""},
		{"Namespaced", "      template: {apiVersion: v1, kind: Namespace, metadata: {name: x, namespace: y}}\n",
			"spec.resources[0].template.metadata.namespace: Namespace is cluster-scoped and must not set metadata.namespace"},
		{"Namespaced", "      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n", ""},
		{"Cluster", "      externalRef: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}}\n",
			"spec.resources[0].externalRef.metadata: ConfigMap is namespaced and must set metadata.namespace: the instance kind is cluster-scoped (spec.schema.scope: Cluster)"},
		{"Cluster", "      externalRef: {apiVersion: v1, kind: ConfigMap, metadata: {selector: {matchLabels: {a: b}}}}\n", ""},
	} {
		_, err := Compile(decodeRGDTB(t, rgd(tc.scope, tc.res)))
		if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
			t.Errorf("%s %s: got %v, want %q", tc.scope, tc.res, err, tc.wantErr)
		}
	}
}
