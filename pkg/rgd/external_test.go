package rgd

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestExternalSelectorAllNamespaces: an externalRef with a selector and no
// namespace matches the objects of every namespace (kro's docs,
// 05-external-references.md); with a namespace, only that one's.
func TestExternalSelectorAllNamespaces(t *testing.T) {
	rgd := func(ns string) *Compiled {
		c, err := Compile(decodeRGDTB(t, `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: extsel}
spec:
  schema:
    apiVersion: v1alpha1
    kind: ExtSel
    spec:
      team: string | default="red"
    status:
      found: ${teamConfigs.map(c, c.metadata.namespace + "/" + c.metadata.name).sort().join(",")}
  resources:
    - id: teamConfigs
      externalRef:
        apiVersion: v1
        kind: ConfigMap
        metadata:
`+ns+`          selector:
            matchLabels:
              team: ${schema.spec.team}
`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cm := func(ns, name, team string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"team": team})
		return u
	}
	for _, tc := range []struct{ ns, want string }{
		{"", "default/red-a,other/red-b"},
		{"          namespace: other\n", "other/red-b"},
	} {
		inst, _, err := runInstance(t, rgd(tc.ns), "ExtSel", map[string]any{"team": "red"},
			cm("default", "red-a", "red"), cm("other", "red-b", "red"), cm("other", "blue", "blue"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(inst.Object, "status", "found"); got != tc.want {
			t.Errorf("namespace %q: found %q, want %q", tc.ns, got, tc.want)
		}
	}
}
