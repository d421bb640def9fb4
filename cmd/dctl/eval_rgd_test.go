package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

var updateRGD = flag.Bool("update-rgd", false, "rewrite the expected outputs under testdata/rgd/")

// evalRGD runs dctl eval on testdata/rgd/<name>/rgd.yaml with the inputs
// given (file names in that directory), compares the output with
// expected.yaml there and returns the output objects.
func evalRGD(t *testing.T, name string, inputs ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join("testdata", "rgd", name)
	o := &evalOptions{operatorFiles: []string{filepath.Join(dir, "rgd.yaml")}, output: "yaml"}
	for _, in := range inputs {
		o.inputFiles = append(o.inputFiles, filepath.Join(dir, in))
	}
	var stdout, stderr bytes.Buffer
	if err := runEval(t.Context(), o, &stdout, &stderr); err != nil {
		t.Fatalf("dctl eval: %v\n%s", err, stderr.String())
	}
	golden := filepath.Join(dir, "expected.yaml")
	if len(inputs) > 1 || inputs[0] != "input.yaml" {
		golden = filepath.Join(dir, "expected-"+strings.TrimSuffix(strings.Join(inputs, "+"), ".yaml")+".yaml")
	}
	if *updateRGD {
		if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-rgd to create it)", err)
	}
	if !bytes.Equal(want, stdout.Bytes()) {
		t.Errorf("output differs from %s (run with -update-rgd and review the diff):\n%s", golden, stdout.String())
	}
	objs, err := operator.DecodeObjects(bytes.NewReader(stdout.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the object of the kind and name, or nil.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func str(t *testing.T, o *unstructured.Unstructured, path ...string) string {
	t.Helper()
	if o == nil {
		t.Fatalf("no object to read %v from", path)
	}
	v, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	if v == nil {
		return "<none>"
	}
	s, ok := v.(string)
	if !ok {
		b, _ := yamlOf(v)
		return strings.TrimSpace(b)
	}
	return s
}

func yamlOf(v any) (string, error) {
	b, err := yaml.Marshal(v)
	return string(b), err
}

// condition returns the status of the instance's condition of the type.
func condition(t *testing.T, o *unstructured.Unstructured, typ string) string {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m["status"].(string)
		}
	}
	return "<none>"
}

// The webapp RGD: each WebApp gets its Deployment; the Service reads the
// Deployment, so it is created once the Deployment is ready (readyWhen);
// the status reads both, unset while what it reads is missing, and the
// instance is ACTIVE with Ready True once every resource is ready (kro's
// docs: 04-dependencies-ordering.md, 03-readiness.md, 15-instances.md).
func TestEvalRGDWebapp(t *testing.T) {
	objs := evalRGD(t, "webapp", "input.yaml")
	shop, blog := find(objs, "WebApp", "shop"), find(objs, "WebApp", "blog")
	for _, c := range []struct{ got, want string }{
		{str(t, shop, "status", "state"), "ACTIVE"},
		{condition(t, shop, "Ready"), "True"},
		{condition(t, shop, "ResourcesReady"), "True"},
		{str(t, shop, "status", "endpoint"), "http://shop-svc.default.svc:8080"},
		{str(t, blog, "status", "state"), "IN_PROGRESS"},
		{condition(t, blog, "Ready"), "False"},
		{str(t, blog, "status", "endpoint"), "<none>"},
		{str(t, blog, "status", "availableReplicas"), "<none>"},
		{str(t, find(objs, "Deployment", "blog"), "metadata", "labels", "kro.run/instance-name"), "blog"},
		{str(t, find(objs, "Deployment", "blog"), "metadata", "ownerReferences"), "- apiVersion: kro.run/v1alpha1\n  controller: true\n  kind: WebApp\n  name: blog\n  uid: 5d0c2c51-0002"},
		{str(t, find(objs, "Service", "shop-svc"), "spec", "selector", "app"), "shop"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if shop.Object["status"].(map[string]any)["availableReplicas"] != int64(2) {
		t.Errorf("shop availableReplicas = %v, want 2", shop.Object["status"])
	}
	if find(objs, "Service", "blog-svc") != nil {
		t.Errorf("blog's Service exists before its Deployment is ready")
	}
}

// An instance input with a deletionTimestamp and the instance finalizer is
// kept, being deleted (as the API server keeps it): its resources go,
// the Service before the Deployment it reads (the Deployment written over
// the input object of that name is the input again, as for any deleted
// target), and its status says DELETING; the other instance is untouched.
func TestEvalRGDDeleting(t *testing.T) {
	objs := evalRGD(t, "webapp", "input.yaml", "delete.yaml")
	shop := find(objs, "WebApp", "shop")
	if shop == nil {
		t.Fatal("the WebApp shop is gone; it is held by its finalizer")
	}
	for _, c := range []struct{ got, want string }{
		{str(t, shop, "status", "state"), "DELETING"},
		{condition(t, shop, "ResourcesReady"), "Unknown"},
		{condition(t, shop, "Ready"), "Unknown"},
		{str(t, find(objs, "WebApp", "blog"), "status", "state"), "IN_PROGRESS"},
		{str(t, find(objs, "Deployment", "shop"), "metadata", "labels"), "<none>"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if find(objs, "Service", "shop-svc") != nil {
		t.Errorf("the Service of the deleting WebApp shop remains")
	}
}

// includeWhen: the Ingress exists only while spec.ingress.enabled holds;
// turning it off deletes it and unsets the status read from it (kro's
// docs: 02-conditional-creation.md). An excluded resource does not keep
// the instance from being ACTIVE.
func TestEvalRGDIncludeWhen(t *testing.T) {
	objs := evalRGD(t, "ingress", "input.yaml")
	if find(objs, "Ingress", "public") == nil || find(objs, "Ingress", "internal") != nil {
		t.Errorf("want an Ingress for public only")
	}
	if got := str(t, find(objs, "Site", "public"), "status", "host"); got != "public.example.com" {
		t.Errorf("public host = %q", got)
	}
	for _, name := range []string{"public", "internal"} {
		if got := str(t, find(objs, "Site", name), "status", "state"); got != "ACTIVE" {
			t.Errorf("%s state = %q, want ACTIVE", name, got)
		}
	}
	objs = evalRGD(t, "ingress", "input.yaml", "disable.yaml")
	if find(objs, "Ingress", "public") != nil {
		t.Errorf("the Ingress stays after includeWhen turned false")
	}
	if got := str(t, find(objs, "Site", "public"), "status", "host"); got != "<none>" {
		t.Errorf("public host = %q after the Ingress went", got)
	}
}

// forEach over two dimensions: one ConfigMap per item of the Cartesian
// product, each labelled with its index and the collection's size; a
// resource reading the collection gets it as a list in kro's order (the
// first dimension outermost) once every item is ready (kro's docs:
// 04-collections.md).
func TestEvalRGDForEach(t *testing.T) {
	objs := evalRGD(t, "collection", "input.yaml")
	for i, name := range []string{"edge-eu-web", "edge-eu-db", "edge-us-web", "edge-us-db"} {
		cm := find(objs, "ConfigMap", name)
		if got := str(t, cm, "metadata", "labels", "kro.run/collection-index"); got != string(rune('0'+i)) {
			t.Errorf("%s index = %q, want %d", name, got, i)
		}
		if got := str(t, cm, "metadata", "labels", "kro.run/collection-size"); got != "4" {
			t.Errorf("%s size = %q, want 4", name, got)
		}
	}
	if got := str(t, find(objs, "Secret", "edge-summary"), "data", "names"); got != "ZWRnZS1ldS13ZWIsZWRnZS1ldS1kYixlZGdlLXVzLXdlYixlZGdlLXVzLWRi" { // edge-eu-web,edge-eu-db,edge-us-web,edge-us-db
		t.Errorf("summary names = %q", got)
	}
	fleet := find(objs, "Fleet", "edge")
	if got := str(t, fleet, "status", "configs"); got != "4" {
		t.Errorf("status.configs = %q, want 4", got)
	}
	if got := str(t, fleet, "status", "state"); got != "ACTIVE" {
		t.Errorf("state = %q, want ACTIVE", got)
	}
}

// externalRef: the app reads a ConfigMap it does not manage, found by a
// name from the instance; it is never written, and an instance whose
// ConfigMap does not exist waits (no Deployment, IN_PROGRESS) (kro's docs:
// 05-external-references.md).
func TestEvalRGDExternalRef(t *testing.T) {
	objs := evalRGD(t, "external", "input.yaml")
	if got := str(t, find(objs, "Deployment", "api"), "spec", "template", "spec", "containers"); !strings.Contains(got, "value: debug") {
		t.Errorf("api's container does not carry the ConfigMap's value:\n%s", got)
	}
	if got := str(t, find(objs, "ConfiguredApp", "api"), "status", "logLevel"); got != "debug" {
		t.Errorf("api logLevel = %q", got)
	}
	if find(objs, "Deployment", "worker") != nil {
		t.Errorf("worker's Deployment exists without its ConfigMap")
	}
	if got := str(t, find(objs, "ConfiguredApp", "worker"), "status", "state"); got != "IN_PROGRESS" {
		t.Errorf("worker state = %q, want IN_PROGRESS", got)
	}
	if find(objs, "ConfigMap", "platform-config") != nil {
		t.Errorf("the external ConfigMap is written (it is not a target)")
	}
}

// dctl visualize and dctl rbac take an RGD file as the Operator it compiles
// to.
func TestVisualizeAndRBACOfRGD(t *testing.T) {
	f := filepath.Join("testdata", "rgd", "webapp", "rgd.yaml")
	var out bytes.Buffer
	if err := runVisualize(&cobra.Command{}, &visualizeOptions{files: []string{f}, format: "mermaid"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "operator rgd-webapp.kro.run") {
		t.Errorf("visualize:\n%s", out.String())
	}
	out.Reset()
	var stderr bytes.Buffer
	if err := runRBAC(&rbacOptions{files: []string{f}, offline: true, output: "yaml", name: "dcontroller-operators"}, &out, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "webapps.kro.run/status: patch") {
		t.Errorf("rbac:\n%s", out.String())
	}
}

// A cluster-scoped instance kind (scope: Cluster): offline, as live, the
// instance is written without a namespace (its CRD says it is
// cluster-scoped), so its status is patched; its Namespace is made.
func TestEvalRGDClusterScope(t *testing.T) {
	objs := evalRGD(t, "cluster", "input.yaml")
	for name, ns := range map[string]string{"one": "team-one", "two": "space-ns"} {
		if find(objs, "Namespace", ns) == nil {
			t.Errorf("no Namespace %s", ns)
		}
		sp := find(objs, "Space", name)
		if got := str(t, sp, "status", "ns"); got != ns {
			t.Errorf("Space %s: status.ns = %q, want %s", name, got, ns)
		}
		if got := str(t, sp, "status", "state"); got != "ACTIVE" {
			t.Errorf("Space %s: state = %q, want ACTIVE", name, got)
		}
	}
}

// SimpleSchema defaults: dctl eval gives an instance input the defaults of
// its CRD's schema, as the API server does when it stores it, so the
// Deployment reading them is made (its Service waits for it to be ready).
func TestEvalRGDDefaults(t *testing.T) {
	objs := evalRGD(t, "webapp", "nodefaults.yaml")
	if got := str(t, find(objs, "Deployment", "bare"), "spec", "template", "spec", "containers"); !strings.Contains(got, "image: nginx") || !strings.Contains(got, "containerPort: 8080") {
		t.Errorf("Deployment containers = %s", got)
	}
	if got := str(t, find(objs, "WebApp", "bare"), "spec", "replicas"); got != "1" {
		t.Errorf("spec.replicas = %s, want the default 1", got)
	}
}
