package rbac

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

func decode(t *testing.T, s string) []*opv1a1.Operator {
	t.Helper()
	ops, err := operator.DecodeOperators(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func rule(group, resource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
}

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name       string
		op         string
		cluster    []rbacv1.PolicyRule
		namespaced map[string][]rbacv1.PolicyRule
	}{{
		name: "patcher on its own source kind: the namespaced source is covered by the target",
		op: `
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod, namespace: default}]
      pipeline: {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}}
      target: {apiGroup: "", kind: Pod, type: Patcher}`,
		cluster: []rbacv1.PolicyRule{rule("", "pods", "get", "list", "watch", "patch")},
	}, {
		name: "a namespaced source is watched cluster-wide (shared informers)",
		op: `
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Service, namespace: web}]
      pipeline: {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, data: {x: "y"}}}
      target: {apiGroup: "", kind: ConfigMap}`,
		cluster: []rbacv1.PolicyRule{
			rule("", "configmaps", "get", "list", "watch", "create", "update", "delete"),
			rule("", "services", "get", "list", "watch"),
		},
	}, {
		name: "views and OneShot sources need nothing; Applier writes with patch (and creates)",
		op: `
spec:
  controllers:
    - name: a
      sources: [{kind: Health}, {apiGroup: "", kind: Pod, type: OneShot}]
      pipeline:
        - "@join": true
        - "@project": {metadata: {name: x, namespace: y}}
      target: {apiGroup: apps, kind: Deployment, type: Applier}
    - name: b
      sources: [{apiGroup: networking.k8s.io, kind: Ingress}]
      pipeline: {"@select": true}
      target: {kind: IngressView}`,
		cluster: []rbacv1.PolicyRule{
			rule("apps", "deployments", "get", "list", "watch", "create", "patch"),
			rule("networking.k8s.io", "ingresses", "get", "list", "watch"),
		},
	}, {
		name: "a pipeline that sets status gets the status subresource",
		op: `
spec:
  controllers:
    - name: c
      sources: [{apiGroup: apps, kind: Deployment}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          status: {ok: true}
      target: {apiGroup: apps, kind: Deployment, type: Patcher}`,
		cluster: []rbacv1.PolicyRule{
			rule("apps", "deployments", "get", "list", "watch", "patch"),
			rule("apps", "deployments/status", "patch"),
		},
	}, {
		name: "verbs of several controllers on one resource are merged",
		op: `
spec:
  controllers:
    - name: reader
      sources: [{apiGroup: "", kind: ConfigMap, namespace: a}]
      pipeline: {"@select": true}
      target: {kind: V}
    - name: writer
      sources: [{kind: V}]
      pipeline: {"@project": {metadata: {name: n, namespace: a}}}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
    - name: other-ns
      sources: [{apiGroup: "", kind: Secret, namespace: b}, {apiGroup: "", kind: ConfigMap, namespace: b}]
      pipeline: [{"@join": true}, {"@project": {metadata: {name: n, namespace: b}}}]
      target: {kind: W}`,
		cluster: []rbacv1.PolicyRule{
			rule("", "configmaps", "get", "list", "watch", "patch"),
			rule("", "secrets", "get", "list", "watch"),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ops := decode(t, "apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {name: op}\n"+tc.op)
			r, err := Compute(ops, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Cluster, tc.cluster) {
				t.Errorf("cluster rules\n got %v\nwant %v", r.Cluster, tc.cluster)
			}
			if tc.namespaced == nil {
				tc.namespaced = map[string][]rbacv1.PolicyRule{}
			}
			if !reflect.DeepEqual(r.Namespaced, tc.namespaced) {
				t.Errorf("namespaced rules\n got %v\nwant %v", r.Namespaced, tc.namespaced)
			}
		})
	}
}

func TestComputeWithMapper(t *testing.T) {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "example.com", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Group: "", Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.AddSpecific(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gizmo"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmoes"},
		schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmo"}, meta.RESTScopeNamespace)
	ops := decode(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: op}
spec:
  controllers:
    - name: c
      sources:
        - {apiGroup: "", kind: Namespace, namespace: ignored-for-cluster-scoped-kinds}
        - {apiGroup: example.com, kind: Gizmo, namespace: team}
      pipeline: [{"@join": true}, {"@project": {metadata: {name: x}}}]
      target: {apiGroup: example.com, kind: Widget, type: Patcher}
`)
	r, err := Compute(ops, Options{Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	wantCluster := []rbacv1.PolicyRule{
		rule("", "namespaces", "get", "list", "watch"),
		// The mapper's irregular plural wins over the guess ("gizmos").
		rule("example.com", "gizmoes", "get", "list", "watch"),
		rule("example.com", "widgets", "get", "list", "watch", "patch"),
	}
	if !reflect.DeepEqual(r.Cluster, wantCluster) {
		t.Errorf("cluster rules\n got %v\nwant %v", r.Cluster, wantCluster)
	}
	wantNS := map[string][]rbacv1.PolicyRule{}
	if !reflect.DeepEqual(r.Namespaced, wantNS) {
		t.Errorf("namespaced rules\n got %v\nwant %v", r.Namespaced, wantNS)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "kind Widget.example.com: not served by the cluster") {
		t.Errorf("warnings: %q", r.Warnings)
	}
}

func TestComputeErrors(t *testing.T) {
	ops := decode(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: bad}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: Pod}]
      pipeline: {"@select": true}
      target: {apiGroup: "", kind: Pod, type: Replacer}
`)
	_, err := Compute(ops, Options{})
	if err == nil || err.Error() != `operator "bad": spec.controllers[0].target.type: unknown target type "Replacer" (want Updater, Patcher or Applier)` {
		t.Fatalf("error: %v", err)
	}
}

func TestWritesStatus(t *testing.T) {
	for _, tc := range []struct {
		pipeline string
		want     bool
	}{
		{`{"@project": {"metadata": {}, "status": {}}}`, true},
		{`{"@project": {"metadata": {}, "spec": {}}}`, false},
		{`{"@project": {"metadata": {}, "$.status.ready": true}}`, true},
		{`[{"@project": {"status": 1}}, {"@project": {"metadata": {}}}]`, false},
		{`[{"@project": [{"status": 1}, {"metadata": {}}]}]`, true},
		{`[{"@project": [{"metadata": {}}, {"spec": 1}]}]`, false},
		{`[{"@project": [{"$.": "$."}, {"$.metadata.labels.a": "b"}]}]`, true},
		{`[{"@project": [{"metadata": {}}, {"status": 1}]}]`, true},
		{`[{"@project": {"status": 1}}, {"@select": true}, {"@gather": ["$.a", "$.b"]}]`, true},
		{`[{"@project": {"status": 1}}, {"@groupBy": ["$.a", "$.b"]}]`, false},
		{`{"@select": true}`, true},
		{`[{"@join": true}, {"@select": true}]`, false},
	} {
		got, err := WritesStatus([]byte(tc.pipeline))
		if err != nil {
			t.Fatalf("%s: %v", tc.pipeline, err)
		}
		if got != tc.want {
			t.Errorf("WritesStatus(%s) = %v, want %v", tc.pipeline, got, tc.want)
		}
	}
}

// TestRenderAnnotator renders the rules of the pod annotator example:
// the explanation, the objects with a binding, and the Helm values.
func TestRenderAnnotator(t *testing.T) {
	f, err := os.Open("../../examples/pod-container-num-annotator/operator.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := operator.DecodeOperators(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Compute(ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.Explain(&buf); err != nil {
		t.Fatal(err)
	}
	wantExplain := `# pod-container-num-annotator/pod-container-num-annotator spec.controllers[0].sources[0] (Watcher source): pods: get, list, watch
# pod-container-num-annotator/pod-container-num-annotator spec.controllers[0].target (Patcher target): pods: get, list, watch, patch
`
	if buf.String() != wantExplain {
		t.Errorf("explain:\n%s\nwant:\n%s", buf.String(), wantExplain)
	}
	buf.Reset()
	objs := r.Objects(ObjectOptions{Name: "dcontroller-operators", Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dcontroller", Namespace: "dcontroller-system"}}})
	if err := WriteYAML(&buf, objs); err != nil {
		t.Fatal(err)
	}
	want := `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: dcontroller-operators
rules:
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - patch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: dcontroller-operators
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: dcontroller-operators
subjects:
- kind: ServiceAccount
  name: dcontroller
  namespace: dcontroller-system
`
	if buf.String() != want {
		t.Errorf("yaml:\n%s\nwant:\n%s", buf.String(), want)
	}
	vals, err := r.HelmValues()
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		RBAC struct {
			Mode   string `json:"mode"`
			Scoped struct {
				ClusterRules    []rbacv1.PolicyRule            `json:"clusterRules"`
				NamespacedRules map[string][]rbacv1.PolicyRule `json:"namespacedRules"`
			} `json:"scoped"`
		} `json:"rbac"`
	}
	if err := yaml.UnmarshalStrict(vals, &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.RBAC.Mode != "scoped" || !reflect.DeepEqual(parsed.RBAC.Scoped.ClusterRules, r.Cluster) || len(parsed.RBAC.Scoped.NamespacedRules) != 0 {
		t.Errorf("helm values:\n%s", vals)
	}
}

func TestComputeMetacontroller(t *testing.T) {
	ca := "ca.crt"
	in := Input{
		Composites: []*mcv1a1.CompositeController{{
			ObjectMeta: metav1.ObjectMeta{Name: "cc"},
			Spec: mcv1a1.CompositeControllerSpec{
				ParentResource: mcv1a1.CompositeControllerParentResourceRule{ResourceRule: mcv1a1.ResourceRule{APIVersion: "example.com/v1", Resource: "gizmoes"}},
				ChildResources: []mcv1a1.CompositeControllerChildResourceRule{{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
				EndpointConfigs: []mcv1a1.EndpointConfig{{Host: "hooks", CABundle: &mcv1a1.CABundleConfig{
					ConfigMapRef: &mcv1a1.KeySelector{Name: "hook-ca", Namespace: "hooks", Key: ca}}}},
			},
		}},
		Decorators: []*mcv1a1.DecoratorController{{
			ObjectMeta: metav1.ObjectMeta{Name: "dc"},
			Spec: mcv1a1.DecoratorControllerSpec{
				Resources: []mcv1a1.DecoratorControllerResourceRule{{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
				// Singular: the mapper gives the plural the RBAC rule needs.
				Attachments: []mcv1a1.DecoratorControllerAttachmentRule{{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "secret"}}},
			},
		}},
	}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	r, err := ComputeInput(in, Options{Mapper: m})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		// The child and decorated verbs on configmaps merge.
		rule("", "configmaps", "get", "list", "watch", "create", "update", "patch", "delete"),
		rule("", "configmaps/finalizers", "update"),
		rule("", "configmaps/status", "update"),
		rule("", "secrets", "get", "list", "watch", "create", "update", "patch", "delete"),
		rule("example.com", "gizmoes", "get", "list", "watch", "update", "patch"),
		rule("example.com", "gizmoes/finalizers", "update"),
		rule("example.com", "gizmoes/status", "update"),
	}
	if !reflect.DeepEqual(r.Cluster, want) {
		t.Errorf("cluster rules\n got %v\nwant %v", r.Cluster, want)
	}
	// The CA ConfigMap is covered by the cluster-wide get on configmaps.
	if len(r.Namespaced) != 0 {
		t.Errorf("namespaced rules: %v", r.Namespaced)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "resource gizmoes.example.com: not served by the cluster") {
		t.Errorf("warnings: %q", r.Warnings)
	}

	// Without the children on configmaps, the CA ConfigMap needs a Role
	// with its name.
	in.Composites[0].Spec.ChildResources = nil
	in.Decorators = nil
	r, err = ComputeInput(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantNS := map[string][]rbacv1.PolicyRule{"hooks": {{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"hook-ca"}, Verbs: []string{"get"}}}}
	if !reflect.DeepEqual(r.Namespaced, wantNS) {
		t.Errorf("namespaced rules\n got %v\nwant %v", r.Namespaced, wantNS)
	}

	in.Composites[0].Spec.ParentResource.APIVersion = "a/b/c"
	if _, err := ComputeInput(in, Options{}); err == nil || err.Error() != `CompositeController "cc": spec.parentResource.apiVersion: invalid apiVersion "a/b/c"` {
		t.Errorf("error: %v", err)
	}
}

// resourceLists is Options.Discovery over fixed resource lists by group
// version; a group version it lacks is an error.
type resourceLists map[string][]string

func (l resourceLists) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	names, ok := l[gv]
	if !ok {
		return nil, &meta.NoKindMatchError{}
	}
	out := &metav1.APIResourceList{GroupVersion: gv}
	for _, n := range names {
		out.APIResources = append(out.APIResources, metav1.APIResource{Name: n})
	}
	return out, nil
}

// TestComputeStatusSubresource: with discovery, a target whose pipeline
// output sets status gets a <resource>/status rule only when its kind has
// the status subresource; a group version discovery cannot list gets it.
func TestComputeStatusSubresource(t *testing.T) {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "example.com", Version: "v1"}})
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gizmo"}, meta.RESTScopeNamespace)
	disc := resourceLists{
		"v1":      {"configmaps", "pods", "pods/status"},
		"apps/v1": {"deployments", "deployments/scale", "deployments/status"},
	}
	ops := decode(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: op}
spec:
  controllers:
    - name: cm
      sources: [{kind: V}]
      pipeline: {"@project": {metadata: {name: n, namespace: a}, status: {ok: true}}}
      target: {apiGroup: "", kind: ConfigMap}
    - name: deploy
      sources: [{kind: V}]
      pipeline: {"@project": {metadata: {name: n, namespace: a}, status: {ok: true}}}
      target: {apiGroup: apps, kind: Deployment, type: Patcher}
    - name: gizmo
      sources: [{kind: V}]
      pipeline: {"@project": {metadata: {name: n, namespace: a}, status: {ok: true}}}
      target: {apiGroup: example.com, kind: Gizmo, type: Applier}
`)
	r, err := Compute(ops, Options{Mapper: m, Discovery: disc})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		rule("", "configmaps", "get", "list", "watch", "create", "update", "delete"),
		rule("apps", "deployments", "get", "list", "watch", "patch"),
		rule("apps", "deployments/status", "patch"),
		rule("example.com", "gizmos", "get", "list", "watch", "create", "patch"),
		rule("example.com", "gizmos/status", "patch"),
	}
	if !reflect.DeepEqual(r.Cluster, want) {
		t.Errorf("cluster rules\n got %v\nwant %v", r.Cluster, want)
	}
}

// A pipeline in branch form sets the status of a target only when a branch
// writing it does, or passes on a status from its inputs.
func TestWritesStatusTo(t *testing.T) {
	const branches = `[
	  [{"@inputs": ["App"]}, {"@project": {"metadata": {}, "spec": {}}}, {"@output": "Deployment"}],
	  [{"@inputs": ["App"]}, {"@project": {"metadata": {}, "status": {}}}, {"@output": "App"}],
	  [{"@inputs": ["Pod"]}, {"@select": true}, {"@output": "running"}],
	  [{"@inputs": ["running"]}, {"@select": true}, {"@output": "Copy"}],
	  [{"@inputs": ["App"]}, {"@project": {"metadata": {}}}, {"@output": "bare"}],
	  [{"@inputs": ["bare"]}, {"@select": true}, {"@output": "Bare"}],
	  [{"@inputs": ["App", "Pod"]}, {"@join": true}, {"@output": "Joined"}]
	]`
	for _, tc := range []struct {
		output string
		want   bool
	}{
		{"Deployment", false},
		{"App", true},
		{"Copy", true}, // a Pod's own status, through a stream
		{"Bare", false},
		{"Joined", false},
		{"Missing", false},
		{"", true},
	} {
		got, err := WritesStatusTo([]byte(branches), tc.output)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("WritesStatusTo(%q) = %v, want %v", tc.output, got, tc.want)
		}
	}
	// A plain pipeline: the name does not matter.
	if got, _ := WritesStatusTo([]byte(`{"@project": {"status": 1}}`), "Other"); !got {
		t.Error("a plain pipeline setting status: WritesStatusTo = false")
	}
}

// A target that only adopts (adoption: Adopt) never creates: no create verb.
func TestAdoptOnlyTargetsDoNotCreate(t *testing.T) {
	ops := decode(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: op}
spec:
  controllers:
    - name: a
      sources: [{kind: V}]
      pipeline: {"@project": {metadata: {name: n, namespace: a}}}
      targets:
        - {apiGroup: "", kind: ConfigMap, type: Applier, adoption: Adopt}
        - {apiGroup: "", kind: Secret, adoption: Adopt}
`)
	r, err := Compute(ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		rule("", "configmaps", "get", "list", "watch", "patch"),
		rule("", "secrets", "get", "list", "watch", "update", "delete"),
	}
	if !reflect.DeepEqual(r.Cluster, want) {
		t.Errorf("cluster rules\n got %v\nwant %v", r.Cluster, want)
	}
}
