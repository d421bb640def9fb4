package operator

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func mustOffline(t *testing.T, y string, opts OfflineOptions) *Offline {
	t.Helper()
	ops, err := DecodeOperators(strings.NewReader(y))
	if err != nil {
		t.Fatal(err)
	}
	off, err := NewOffline(ops, opts)
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func input(t *testing.T, y string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := DecodeObjects(strings.NewReader(y))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// Two controllers that write each other's source view converge: each write
// that changes nothing makes no event.
func TestOfflineCycleConverges(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: ping}
spec:
  controllers:
    - name: a-to-b
      sources: [{kind: A}]
      pipeline: {"@project": {metadata: "$.metadata", spec: {v: "$.spec.v"}}}
      target: {kind: B}
    - name: b-to-a
      sources: [{kind: B}]
      pipeline: {"@project": {metadata: "$.metadata", spec: {v: "$.spec.v"}}}
      target: {kind: A}
`, OfflineOptions{})
	for _, obj := range input(t, `apiVersion: ping.view.dcontroller.io/v1alpha1
kind: A
metadata: {name: x, namespace: ns}
spec: {v: 1}
`) {
		if err := off.Apply(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	res := off.Result()
	if len(res) != 2 || res[0].GetKind() != "A" || res[1].GetKind() != "B" {
		t.Fatalf("result %v", res)
	}
	if v, _, _ := unstructured.NestedInt64(res[1].Object, "spec", "v"); v != 1 {
		t.Errorf("B.spec.v = %d", v)
	}
}

// A controller that changes its own source on every run never converges;
// the run stops with a clear error instead of looping forever.
func TestOfflineNoFixedPoint(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: counter}
spec:
  controllers:
    - name: inc
      sources: [{kind: Counter}]
      pipeline: {"@project": {metadata: "$.metadata", spec: {count: {"@add": ["$.spec.count", 1]}}}}
      target: {kind: Counter}
`, OfflineOptions{MaxEvents: 50})
	err := off.Apply(context.Background(), input(t, "apiVersion: counter.view.dcontroller.io/v1alpha1\nkind: Counter\nmetadata: {name: x}\nspec: {count: 0}\n")[0])
	if err == nil || !strings.Contains(err.Error(), `no fixed point after 50 events: the controllers keep changing each other's output; busiest writers: operator "counter" controller "inc"`) {
		t.Fatalf("error %v", err)
	}
}

func TestOfflineOneShot(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: boot}
spec:
  controllers:
    - name: init
      sources: [{kind: Tick, type: OneShot}]
      pipeline: {"@project": {metadata: {name: boot-config, namespace: default}, data: {kind: "$.kind"}}}
      target: {apiGroup: "", kind: ConfigMap}
`, OfflineOptions{})
	if err := off.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := off.Result()
	if len(res) != 1 || res[0].GetName() != "boot-config" {
		t.Fatalf("result %v", res)
	}
	if k, _, _ := unstructured.NestedString(res[0].Object, "data", "kind"); k != "Tick" {
		t.Errorf("data.kind = %q", k)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", `document 1: expected apiVersion dcontroller.io/v1alpha1 and kind Operator`},
		{"apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {}\nspec: {controllers: []}\n", "document 1: metadata.name: must not be empty"},
		{"", "no Operator found"},
		{"apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {name: a}\nspec: {controllers: [{nam: x}]}\n", `unknown field "spec.controllers[0].nam"`},
		{"a: [", "document 1"},
		{"apiVersion: dcontroller.io/v1alpha1\nkind: Operator\nmetadata: {name: a}\nspec: {controllers: [{name: c, sources: [{kind: V}], target: {apiGroup: \"\", kind: W, apiGroup: example.com}}]}\n", "document 1: yaml: unmarshal errors:\n  line 4: key \"apiGroup\" already set in map"},
		{"---\napiVersion: v1\n---\nkind: a\nkind: b\n", "document 2: yaml: unmarshal errors:\n  line 2: key \"kind\" already set in map"},
		{"controllers:\n- name: c\n  sources: [{kind: V}]\n  target: {kind: W}\n", "document 1: controllers: this is the spec of an operator without the Operator around it; write it as an Operator: apiVersion: dcontroller.io/v1alpha1, kind: Operator, metadata: {name: <operator name>}, and this document under spec"},
	} {
		_, err := DecodeOperators(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := DecodeObjects(strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {}\n")); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("nameless object: %v", err)
	}
	if _, err := DecodeObjects(strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: a, name: b}\n")); err == nil || !strings.Contains(err.Error(), `key "name" already set`) {
		t.Errorf("duplicate key: %v", err)
	}
	// JSON streams are decoded as before: several objects one after another.
	if objs, err := DecodeObjects(strings.NewReader(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"}}`)); err != nil || len(objs) != 2 {
		t.Errorf("JSON stream: %v %v", objs, err)
	}
	objs, err := DecodeObjects(strings.NewReader("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n"))
	if err != nil || len(objs) != 2 || objs[1].GetName() != "b" {
		t.Errorf("List: %v %v", objs, err)
	}
}

func TestOfflineDeletionTimestampDeletes(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: copy}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline: {"@project": {metadata: {name: {"@concat": ["$.metadata.name", "-copy"]}, namespace: "$.metadata.namespace"}}}
      target: {kind: Copy}
`, OfflineOptions{})
	for _, obj := range input(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: ns}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: ns, deletionTimestamp: "2026-01-01T00:00:00Z"}
`) {
		if err := off.Apply(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	res := off.Result()
	if len(res) != 1 || res[0].GetName() != "b-copy" {
		t.Fatalf("result %v", res)
	}
}

// A controller that grows names without bound stops where the API server
// would: names are validated as DNS subdomains.
func TestOfflineInvalidNamesStopGrowth(t *testing.T) {
	off := mustOffline(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: grow}
spec:
  controllers:
    - name: c
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline: {"@project": {metadata: {name: {"@concat": ["$.metadata.name", "-x"]}, namespace: "$.metadata.namespace"}}}
      target: {apiGroup: "", kind: ConfigMap}
`, OfflineOptions{})
	err := off.Apply(context.Background(), input(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n")[0])
	if err == nil || !strings.Contains(err.Error(), "metadata.name: Invalid value") || !strings.Contains(err.Error(), "must be no more than 253 characters") {
		t.Fatalf("error %v", err)
	}
	if err := off.Apply(context.Background(), input(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name, namespace: ns}\n")[0]); err == nil {
		t.Fatal("an invalid input name was accepted")
	}
}

// Offline runs refuse the view kinds a manager cannot serve, as the manager
// does: two kinds with one resource name.
func TestOfflineViewKindClash(t *testing.T) {
	ops, err := DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: plural-clash}
spec:
  controllers:
    - name: clash
      sources: [{kind: Endpoint}]
      pipeline: {"@project": {metadata: "$.metadata"}}
      target: {kind: Endpoints}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewOffline(ops, OfflineOptions{})
	if err == nil || err.Error() != `operator "plural-clash": spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind); the view API server cannot serve both` {
		t.Fatalf("error %v", err)
	}
}

// Offline runs refuse an Operator sharded by namespace whose pipeline
// combines objects of two namespaces, as the manager does.
func TestOfflineNamespaceShardingChecked(t *testing.T) {
	ops, err := DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: cross}
spec:
  sharding: Namespace
  controllers:
    - name: count
      sources: [{kind: Pod}]
      pipeline:
        - "@gather": ["$.spec.nodeName", "$.metadata.name"]
        - "@project": {metadata: {name: "$.spec.nodeName", namespace: default}}
      target: {kind: PodsPerNode}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewOffline(ops, OfflineOptions{})
	if err == nil || !strings.Contains(err.Error(), `operator "cross": spec.sharding is Namespace, but `) {
		t.Fatalf("error %v", err)
	}
	ops[0].Spec.Sharding = ""
	if _, err := NewOffline(ops, OfflineOptions{}); err != nil {
		t.Fatalf("the same Operator not sharded: %v", err)
	}
}

// Offline runs refuse a namespace-sharded Operator over a well-known
// cluster-scoped kind, as the manager does with the cluster's discovery.
func TestOfflineNamespaceShardingClusterScoped(t *testing.T) {
	ops, err := DecodeOperators(strings.NewReader(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: ns-labels}
spec:
  sharding: Namespace
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: Pod}, {apiGroup: "", kind: Namespace}]
      pipeline:
        - "@join": {"@and": [{"@eq": ["$.Pod.metadata.namespace", "$.Namespace.metadata.name"]}, {"@eq": ["$.Pod.metadata.namespace", "$.Namespace.metadata.namespace"]}]}
        - "@project": {metadata: "$.Pod.metadata"}
      target: {kind: PodInfo}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewOffline(ops, OfflineOptions{})
	if want := `operator "ns-labels": spec.controllers[0].sources[1]: Namespace is cluster-scoped: an operator with spec.sharding Namespace takes only namespaced sources and targets`; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}
