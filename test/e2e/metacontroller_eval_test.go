package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// TestMetacontrollerEvalMatchesManager runs the inline PodService
// CompositeController and the ConfigMap DecoratorController live on a few
// parents, then renders the same controllers offline
// (metacontroller.Render, what dctl eval prints) on the same objects as
// they were applied (with the UIDs the API server gave them), and checks
// that both agree: the same children and attachments, each rendered field
// equal to the server's (the server adds its own: uid, resourceVersion,
// defaults, a Pod's status), the same parent statuses (observedGeneration
// included), finalizers and annotations.
func TestMetacontrollerEvalMatchesManager(t *testing.T) {
	const ns = "e2e-mc-eval"
	startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, readExample(t, "metacontroller-podservice-pipeline", "crd.yaml"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/podservices.examples.dcontroller.io")
	composite := readExample(t, "metacontroller-podservice-pipeline", "controller.yaml")
	decorator := readExample(t, "metacontroller-decorator-pipeline", "controller.yaml")
	applyMC(t, composite)
	applyMC(t, decorator)

	inputs := readExample(t, "metacontroller-podservice-pipeline", "podservice.yaml") + `
---
apiVersion: examples.dcontroller.io/v1
kind: PodService
metadata:
  name: api
  labels: {tier: backend}
spec:
  image: busybox:1.36
  port: 9090
---
` + readExample(t, "metacontroller-decorator-pipeline", "configmap.yaml") + `
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
data: {a: b}
`
	mustKubectl(t, inputs, "-n", ns, "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		for _, name := range []string{"web", "api"} {
			p, err := getObj(t, "examples.dcontroller.io/v1", "PodService", ns, name)
			if err != nil {
				return err.Error()
			}
			if got := fmt.Sprintf("%s %s %s", str(path(p.Object, "status.pods")), str(path(p.Object, "status.services")), str(path(p.Object, "status.observedGeneration"))); got != "1 1 1" {
				return name + " status " + got
			}
		}
		cm, err := getObj(t, "v1", "ConfigMap", ns, "settings")
		if err != nil {
			return err.Error()
		}
		if cm.GetAnnotations()["backup.example.com/copy"] == "" {
			return "settings not annotated yet"
		}
		if _, err := getObj(t, "v1", "ConfigMap", ns, "settings-backup"); err != nil {
			return err.Error()
		}
		return ""
	})
	// Let the follow-up syncs finish.
	time.Sleep(2 * time.Second)

	// The inputs as applied, with the UIDs (and generations) the API
	// server gave them.
	objs, err := operator.DecodeObjects(strings.NewReader(inputs))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		live, err := getObj(t, o.GetAPIVersion(), o.GetKind(), ns, o.GetName())
		if err != nil {
			t.Fatal(err)
		}
		o.SetUID(live.GetUID())
		o.SetGeneration(live.GetGeneration())
	}
	cc := &mcv1a1.CompositeController{}
	dc := &mcv1a1.DecoratorController{}
	if err := yaml.UnmarshalStrict([]byte(composite), cc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(decorator), dc); err != nil {
		t.Fatal(err)
	}
	res, err := metacontroller.Render(context.Background(), []client.Object{cc, dc}, objs, metacontroller.RenderOptions{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	rendered := map[string]*unstructured.Unstructured{}
	for _, o := range res.Objects {
		rendered[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}

	// Every object the manager owns in the namespace is rendered, and the
	// rendering of each is what the server holds.
	uids := map[string]bool{}
	for _, o := range objs {
		uids[string(o.GetUID())] = true
	}
	for _, kind := range []string{"Pod", "Service", "ConfigMap"} {
		for _, o := range listObjs(t, "v1", kind, ns) {
			ref := metav1.GetControllerOf(&o)
			if ref == nil || !uids[string(ref.UID)] {
				continue
			}
			if rendered[kind+" "+ns+"/"+o.GetName()] == nil {
				t.Errorf("the manager wrote %s %s, the rendering lacks it", kind, o.GetName())
			}
		}
	}
	if len(res.Objects) != 2+2+2+2 {
		// 2 PodServices with a Pod and a Service each, the decorated
		// ConfigMap and its copy.
		t.Errorf("rendered %d objects, want 8: %v", len(res.Objects), keys(rendered))
	}
	for key, want := range rendered {
		live, err := getObj(t, want.GetAPIVersion(), want.GetKind(), ns, want.GetName())
		if err != nil {
			t.Errorf("%s: rendered, not on the server: %v", key, err)
			continue
		}
		w, l := normalize(t, want.Object), normalize(t, live.Object)
		if md, ok := w["metadata"].(map[string]any); ok && live.GetUID() != want.GetUID() {
			delete(md, "uid") // created by the manager: the server's own
		}
		if msg := subset(w, l, ""); msg != "" {
			t.Errorf("%s: %s\nrendered:\n%s\nserver:\n%s", key, msg, yamlString(want.Object), yamlString(live.Object))
		}
		if want.GetKind() == "PodService" && !reflect.DeepEqual(w["status"], l["status"]) {
			t.Errorf("%s: status %v rendered, %v on the server", key, w["status"], l["status"])
		}
	}
	if p := rendered["ConfigMap "+ns+"/plain"]; p != nil {
		t.Errorf("the undecorated ConfigMap is rendered: %v", p)
	}
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// normalize round-trips v through JSON (numbers as float64).
func normalize(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// subset returns "" when every field of want is in got with the same value
// (lists: the same length, item by item), else the first difference.
func subset(want, got any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v", at, got)
		}
		for k, v := range w {
			if msg := subset(v, g[k], at+"."+k); msg != "" {
				return msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %v, got %v", at, w, got)
		}
		for i := range w {
			if msg := subset(w[i], g[i], fmt.Sprintf("%s[%d]", at, i)); msg != "" {
				return msg
			}
		}
	default:
		if !reflect.DeepEqual(want, got) {
			return fmt.Sprintf("%s: want %v, got %v", at, want, got)
		}
	}
	return ""
}

func yamlString(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

// TestMetacontrollerEvalFinalizeMatchesManager deletes a parent whose
// CompositeController has a finalize hook, live, and renders the same
// deletion offline: the finalize hook's status, the finalizers left and
// the deleted child agree with what the manager did.
func TestMetacontrollerEvalFinalizeMatchesManager(t *testing.T) {
	const ns = "e2e-mc-eval-fin"
	startManager(t)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, readExample(t, "metacontroller-podservice-pipeline", "crd.yaml"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/podservices.examples.dcontroller.io")
	controller := `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: eval-finalize
spec:
  generateSelector: true
  parentResource:
    apiVersion: examples.dcontroller.io/v1
    resource: podservices
  childResources:
    - apiVersion: v1
      resource: pods
  hooks:
    sync:
      pipeline:
        children:
          - apiVersion: v1
            kind: Pod
            metadata:
              name: {"@concat": ["$.parent.metadata.name", "-pod"]}
            spec:
              containers:
                - name: web
                  image: "$.parent.spec.image"
    finalize:
      pipeline:
        status:
          phase: Finalizing
          pods: {"@len": "$.children['Pod.v1']"}
        children: []
        finalized: {"@eq": [{"@len": "$.children['Pod.v1']"}, 0]}
`
	applyMC(t, controller)
	const fin = "metacontroller.io/compositecontroller-eval-finalize"
	mustKubectl(t, `apiVersion: examples.dcontroller.io/v1
kind: PodService
metadata:
  name: web
  finalizers: [example.com/keep]
spec:
  image: nginx:1.27
`, "-n", ns, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "-n", ns, "patch", "podservice", "web", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	})
	var pod *unstructured.Unstructured
	eventually(t, 60*time.Second, func() string {
		p, err := getObj(t, "examples.dcontroller.io/v1", "PodService", ns, "web")
		if err != nil {
			return err.Error()
		}
		if !contains(p.GetFinalizers(), fin) {
			return fmt.Sprintf("finalizers %v", p.GetFinalizers())
		}
		if pod, err = getObj(t, "v1", "Pod", ns, "web-pod"); err != nil {
			return err.Error()
		}
		return ""
	})
	mustKubectl(t, "", "-n", ns, "delete", "podservice", "web", "--wait=false")
	var live *unstructured.Unstructured
	eventually(t, 60*time.Second, func() string {
		var err error
		if live, err = getObj(t, "examples.dcontroller.io/v1", "PodService", ns, "web"); err != nil {
			return err.Error()
		}
		if contains(live.GetFinalizers(), fin) {
			return "the finalizer is still there"
		}
		if _, err := getObj(t, "v1", "Pod", ns, "web-pod"); !isNotFound(err) {
			return fmt.Sprintf("the Pod: %v", err)
		}
		return ""
	})

	// The parent as it was deleted (with the controller's finalizer, the
	// deletionTimestamp and generation the deletion gave it), its Pod.
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.dcontroller.io/v1", "kind": "PodService",
		"metadata": map[string]any{"name": "web", "namespace": ns}, "spec": live.Object["spec"]}}
	parent.SetUID(live.GetUID())
	parent.SetGeneration(live.GetGeneration())
	parent.SetDeletionTimestamp(live.GetDeletionTimestamp())
	parent.SetFinalizers([]string{"example.com/keep", fin})
	cc := &mcv1a1.CompositeController{}
	if err := yaml.UnmarshalStrict([]byte(controller), cc); err != nil {
		t.Fatal(err)
	}
	res, err := metacontroller.Render(context.Background(), []client.Object{cc}, []*unstructured.Unstructured{parent, pod}, metacontroller.RenderOptions{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if len(res.Objects) != 1 || len(res.Deleted) != 1 || res.Deleted[0].GetName() != "web-pod" {
		t.Fatalf("rendered %d objects, deleted %d; want the parent, and the Pod deleted", len(res.Objects), len(res.Deleted))
	}
	got := res.Objects[0]
	if w, l := normalize(t, got.Object)["status"], normalize(t, live.Object)["status"]; !reflect.DeepEqual(w, l) {
		t.Errorf("status %v rendered, %v on the server", w, l)
	}
	if !reflect.DeepEqual(got.GetFinalizers(), live.GetFinalizers()) {
		t.Errorf("finalizers %v rendered, %v on the server", got.GetFinalizers(), live.GetFinalizers())
	}
	finalizes := 0
	for _, c := range res.Calls {
		if c.Hook == "finalize" {
			finalizes++
		}
	}
	if finalizes != 2 {
		t.Errorf("%d finalize calls rendered, want 2 (with the Pod, then without)", finalizes)
	}
}
