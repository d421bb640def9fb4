package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// rgdExample reads an RGD of pkg/rgd/testdata/examples.
func rgdExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "pkg", "rgd", "testdata", "examples", name+".rgd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRGDOnAPIServer: the RGD CRD of config/crd keeps an RGD as written
// (SimpleSchema, templates, unknown template fields), defaults its group and
// scope as kro's does, and enforces kro's one-of and immutability rules.
func TestRGDOnAPIServer(t *testing.T) {
	src := rgdExample(t, "web-application")
	mustKubectl(t, src, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "rgd", "web-application", "--wait=false") })
	var want, got map[string]any
	if err := yaml.Unmarshal([]byte(src), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(mustKubectl(t, "", "get", "resourcegraphdefinition.kro.run/web-application", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	wantSpec := want["spec"].(map[string]any)
	wantSpec["schema"].(map[string]any)["scope"] = "Namespaced" // the CRD's default
	if !reflect.DeepEqual(got["spec"], wantSpec) {
		a, _ := yaml.Marshal(got["spec"])
		t.Errorf("the API server changed the RGD's spec:\n%s", a)
	}

	const minimal = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-minimal}
spec:
  schema: {apiVersion: v1alpha1, kind: Minimal, spec: {a: string}}
  resources:
    - id: cm
      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, futureField: {kept: true}}
`
	mustKubectl(t, minimal, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "rgd", "e2e-minimal", "--wait=false") })
	if g := mustKubectl(t, "", "get", "rgd", "e2e-minimal", "-o", "jsonpath={.spec.schema.group} {.spec.schema.scope} {.spec.resources[0].template.futureField.kept}"); g != "kro.run Namespaced true" {
		t.Errorf("defaults and template: %q", g)
	}
	for _, tc := range []struct{ change, want string }{
		{strings.Replace(minimal, "kind: Minimal", "kind: Other", 1), "kind is immutable"},
		{strings.Replace(minimal, "apiVersion: v1alpha1, kind", "apiVersion: v2, kind", 1), "apiVersion is immutable"},
		{strings.Replace(minimal, "kind: Minimal,", "kind: Minimal, scope: Cluster,", 1), "scope is immutable"},
		{strings.Replace(minimal, "- id: cm\n", "- id: cm\n      externalRef: {apiVersion: v1, kind: ConfigMap, metadata: {name: other}}\n", 1),
			"exactly one of template or externalRef must be provided"},
		{strings.Replace(minimal, "template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x}, futureField: {kept: true}}",
			"externalRef: {apiVersion: v1, kind: ConfigMap, metadata: {name: other, selector: {}}}", 1),
			"exactly one of name or selector must be provided"},
		{strings.Replace(minimal, "kind: Minimal", "kind: minimal", 1), "spec.schema.kind"},
	} {
		if out, err := kubectl(t, tc.change, "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want the API server to refuse with %q, got %v %s", tc.want, err, out)
		}
	}
}

// TestRGDInstanceCRDs: the CRDs rgd.CRD generates for the example RGDs are
// accepted by the API server and established, and instances get what
// kro's docs say of them: defaults filled in (down into objects left out),
// required fields, enums and immutable fields enforced, the status
// subresource, kro's printer columns.
func TestRGDInstanceCRDs(t *testing.T) {
	const ns = "e2e-rgd-instances"
	mustKubectl(t, "", "create", "namespace", ns)
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "namespace", ns, "--wait=false") })
	seen := map[string]bool{}
	for _, name := range []string{"webapp", "defaults", "web-application", "coredns", "printer-columns", "cluster-tenant", "job", "vote-app"} {
		r := &krov1a1.ResourceGraphDefinition{}
		if err := yaml.UnmarshalStrict([]byte(rgdExample(t, name)), r); err != nil {
			t.Fatal(err)
		}
		crd, err := rgd.CRD(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if seen[crd.Name] {
			t.Fatalf("%s: two examples give %s", name, crd.Name)
		}
		seen[crd.Name] = true
		b, _ := json.Marshal(crd)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		delete(m, "status")
		b, _ = json.Marshal(m)
		mustKubectl(t, string(b), "apply", "-f", "-")
		crdName := crd.Name
		t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "crd", crdName, "--wait=false") })
		mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd.Name)
	}

	// webapp: an instance with no spec gets every default of kro's example.
	mustKubectl(t, "apiVersion: kro.run/v1alpha1\nkind: WebApp\nmetadata: {name: w, namespace: "+ns+"}\n", "apply", "-f", "-")
	if g := mustKubectl(t, "", "-n", ns, "get", "webapp", "w", "-o", "jsonpath={.spec}"); !jsonEqual(g,
		`{"namespace":"default","image":"nginx","port":8080,"replicas":1,"serviceAccount":"default","service":{"enabled":true},"ingress":{"enabled":false}}`) {
		t.Errorf("webapp defaults: %s", g)
	}
	// The status subresource, and kro's columns.
	mustKubectl(t, `{"status":{"state":"ACTIVE","conditions":[{"type":"Ready","status":"True"}],"availableReplicas":3}}`,
		"-n", ns, "patch", "webapp", "w", "--subresource=status", "--type=merge", "--patch-file=/dev/stdin")
	if g := mustKubectl(t, "", "-n", ns, "get", "webapp", "w", "--no-headers"); !strings.HasPrefix(strings.Join(strings.Fields(g), " "), "w ACTIVE True") {
		t.Errorf("kubectl get webapp: %q", g)
	}

	// defaults: the required field, and the nested defaults.
	if _, err := kubectl(t, "apiVersion: kro.run/v1alpha1\nkind: Something\nmetadata: {name: s, namespace: "+ns+"}\nspec: {name: x}\n", "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "spec.required: Required value") {
		t.Errorf("want spec.required refused, got %v", err)
	}
	mustKubectl(t, "apiVersion: kro.run/v1alpha1\nkind: Something\nmetadata: {name: s, namespace: "+ns+"}\nspec: {required: 7, config: {field: f}}\n", "apply", "-f", "-")
	if g := mustKubectl(t, "", "-n", ns, "get", "something", "s", "-o", "jsonpath={.spec}"); !jsonEqual(g,
		`{"required":7,"number":100,"enabled":true,"element":"e","elements":["a","b","c","d"],"config":{"field":"f","field2":200,"field3":2002}}`) {
		t.Errorf("defaults: %s", g)
	}

	// web-application: enum, pattern, unique list, immutable field.
	wa := func(name, extra string) string {
		return "apiVersion: mycompany.io/v1alpha1\nkind: WebApplication\nmetadata: {name: a, namespace: " + ns + "}\nspec: {name: " + name +
			", image: nginx, values: {any: [thing]}, ports: [80, 443]" + extra + "}\n"
	}
	for _, tc := range []struct{ extra, want string }{
		{", mode: trace", `spec.mode: Unsupported value: "trace"`},
		{", username: a-b", "spec.username: Invalid value"},
		{", replicas: 0", "spec.replicas: Invalid value: 0"},
		{", tags: [x, x]", "spec.tags[1]: Duplicate value"},
		{", primary: {tag: v1}", "spec.primary.image: Required value"},
	} {
		if _, err := kubectl(t, wa("app", tc.extra), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.extra, tc.want, err)
		}
	}
	mustKubectl(t, wa("app", ", primary: {image: busybox}"), "apply", "-f", "-")
	if g := mustKubectl(t, "", "-n", ns, "get", "webapplication", "a", "-o", "jsonpath={.spec.replicas} {.spec.mode} {.spec.primary.tag} {.spec.ingress.path}"); g != "3 info latest /" {
		t.Errorf("web-application defaults: %q", g)
	}
	if _, err := kubectl(t, wa("other", ", primary: {image: busybox}"), "apply", "-f", "-"); err == nil || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("want the immutable name refused, got %v", err)
	}
	if g := mustKubectl(t, "", "get", "wa", "-A", "-o", "name"); !strings.Contains(g, "webapplication.mycompany.io/a") {
		t.Errorf("short name wa: %q", g)
	}

	// cluster-tenant: cluster-scoped instances.
	mustKubectl(t, "apiVersion: kro.run/v1alpha1\nkind: Tenant\nmetadata: {name: t1}\nspec: {targetNamespace: "+ns+"}\n", "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectl(t, "", "delete", "tenants.kro.run", "t1", "--wait=false") })
}

func jsonEqual(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
