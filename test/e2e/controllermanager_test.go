package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// logControllerManagerOnFailure prints the end of the suite's
// kube-controller-manager log when the test fails.
func logControllerManagerOnFailure(t *testing.T) {
	t.Helper()
	if err := kcm.running(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager log (end):\n%s", kcm.logTail())
		}
	})
}

const gcBundleCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: gc-bundle-controller
spec:
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: gcbundles
  childResources:
    - apiVersion: v1
      resource: configmaps
  hooks:
    sync:
      webhook:
        url: %s
`

func gcBundleYAML(name string) string {
	return fmt.Sprintf(`apiVersion: e2e.dcontroller.io/v1
kind: GCBundle
metadata:
  name: %[1]s
  namespace: e2e-gc
spec:
  selector:
    matchLabels: {bundle: %[1]s}
  items: {a: '1', b: '2'}
`, name)
}

// gcChildren returns "name:owner-name:controller:blockOwnerDeletion" of each
// ConfigMap of e2e-gc labelled bundle=parent, sorted.
func gcChildren(t *testing.T, parent string) []string {
	t.Helper()
	var out []string
	for _, cm := range listObjs(t, "v1", "ConfigMap", "e2e-gc") {
		if cm.GetLabels()["bundle"] != parent {
			continue
		}
		s := cm.GetName()
		for _, r := range cm.GetOwnerReferences() {
			s += fmt.Sprintf(":%s:%v:%v", r.Name, r.Controller != nil && *r.Controller, r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestGarbageCollectorDeletesChildren: the children of a deleted
// CompositeController parent are deleted by the garbage collector of the
// suite's kube-controller-manager, through the controller owner reference
// dctl puts on them (dctl itself deletes no child when a parent without a
// finalize hook goes). With the manager stopped, a parent deleted in the
// background loses its children while the other parent keeps its own; with
// the manager running, a foreground deletion (the parent waits for its
// children, which carry blockOwnerDeletion) completes: the controller
// neither recreates the children nor holds the parent back.
func TestGarbageCollectorDeletesChildren(t *testing.T) {
	logControllerManagerOnFailure(t)
	installCRD(t, "GCBundle", "gcbundles", "Namespaced")
	mustKubectl(t, "", "create", "namespace", "e2e-gc")
	stop := startManager(t)
	h := newHookServer(t, bundleHook(""))
	applyMC(t, fmt.Sprintf(gcBundleCC, h.URL))
	mustKubectl(t, gcBundleYAML("p1")+"---\n"+gcBundleYAML("p2"), "apply", "-f", "-")
	for _, p := range []string{"p1", "p2"} {
		want := []string{p + "-a:" + p + ":true:true", p + "-b:" + p + ":true:true"}
		eventually(t, 30*time.Second, func() string {
			if got := gcChildren(t, p); !slices.Equal(got, want) {
				return fmt.Sprintf("children of %s: %v, want %v", p, got, want)
			}
			return ""
		})
	}

	// Background deletion while no dctl runs: only the garbage collector
	// can delete p1's children. It learns of a new kind (the CRD above)
	// at its next discovery, within about 30 seconds.
	stop()
	mustKubectl(t, "", "-n", "e2e-gc", "delete", "gcbundle", "p1", "--cascade=background")
	eventually(t, 90*time.Second, func() string {
		if got := gcChildren(t, "p1"); len(got) != 0 {
			return fmt.Sprintf("children of the deleted p1 remain: %v", got)
		}
		return ""
	})
	if got := gcChildren(t, "p2"); len(got) != 2 {
		t.Fatalf("children of p2 after p1 was deleted: %v", got)
	}

	// Foreground deletion while dctl runs.
	startManager(t)
	time.Sleep(2 * time.Second) // the controller has synced p2 again
	settle(t, h.calls.Load)
	mustKubectl(t, "", "-n", "e2e-gc", "delete", "gcbundle", "p2", "--cascade=foreground", "--wait=false")
	eventually(t, 90*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "GCBundle", "e2e-gc", "p2")
		if !isNotFound(err) {
			return fmt.Sprintf("p2 still there (finalizers %v, err %v), children %v", p.GetFinalizers(), err, gcChildren(t, "p2"))
		}
		if got := gcChildren(t, "p2"); len(got) != 0 {
			return fmt.Sprintf("p2 is gone, its children remain: %v", got)
		}
		return ""
	})
}

// nsOperator copies the ConfigMaps labelled e2e-ns=source (any namespace)
// into the view NsItem, and each NsItem into a ConfigMap <name>-out of its
// namespace (an Updater output).
const nsOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: ns-lifecycle
spec:
  controllers:
    - name: view
      sources:
        - apiGroup: ""
          kind: ConfigMap
          labelSelector: {matchLabels: {e2e-ns: source}}
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {value: "$.data.value"}
      target: {kind: NsItem}
    - name: output
      sources: [{kind: NsItem}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-out"]}
            namespace: "$.metadata.namespace"
            labels: {e2e-ns: output}
          data: {value: "$.spec.value"}
      target: {apiGroup: "", kind: ConfigMap}
`

func nsSourceYAML(ns, name, value string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  namespace: %s
  labels: {e2e-ns: source}
data: {value: %q}
`, name, ns, value)
}

// TestNamespaceDeletion: a namespace that holds an Operator's sources, its
// view objects and its native outputs is deleted. The namespace controller
// of the suite's kube-controller-manager empties it and removes it; the
// views and outputs derived from the objects it held go with them, the
// namespace's neighbour keeps its own, the Operator stays Ready (its
// controllers do not keep failing to restore outputs in the terminating
// namespace), and a namespace of the same name created again is served
// like a new one.
func TestNamespaceDeletion(t *testing.T) {
	logControllerManagerOnFailure(t)
	const gone, kept = "e2e-ns-gone", "e2e-ns-kept"
	rt := startManagerRuntime(t)
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "ns-lifecycle", "--ignore-not-found", "--wait=false")
		_, _ = kubectl(t, "", "delete", "namespace", gone, kept, "--ignore-not-found", "--wait=false")
	})
	mustKubectl(t, "", "create", "namespace", gone)
	mustKubectl(t, "", "create", "namespace", kept)
	mustKubectl(t, nsOperator, "apply", "-f", "-")
	mustKubectl(t, nsSourceYAML(gone, "a", "1")+"---\n"+nsSourceYAML(gone, "b", "2")+"---\n"+nsSourceYAML(kept, "c", "3"), "apply", "-f", "-")

	views := func(ns string) string {
		var names []string
		for _, o := range rt.Views().List(opv1a1.ViewGroupVersion("ns-lifecycle").WithKind("NsItem")) {
			if o.GetNamespace() == ns {
				names = append(names, o.GetName())
			}
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	outputs := func(ns string) string {
		var names []string
		for _, cm := range listObjs(t, "v1", "ConfigMap", ns) {
			if cm.GetLabels()["e2e-ns"] == "output" {
				names = append(names, cm.GetName()+"="+str(path(cm.Object, "data.value")))
			}
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	expect := func(ns, wantViews, wantOutputs string) func() string {
		return func() string {
			if got := views(ns); got != wantViews {
				return fmt.Sprintf("views in %s: %q, want %q", ns, got, wantViews)
			}
			if got := outputs(ns); got != wantOutputs {
				return fmt.Sprintf("outputs in %s: %q, want %q", ns, got, wantOutputs)
			}
			return ""
		}
	}
	ready := func() string {
		if got := readyConditions(t, "ns-lifecycle"); got != "view=True/Ready output=True/Ready" {
			return "ns-lifecycle: " + got
		}
		return ""
	}
	eventually(t, 30*time.Second, expect(gone, "a,b", "a-out=1,b-out=2"))
	eventually(t, 30*time.Second, expect(kept, "c", "c-out=3"))
	eventually(t, 30*time.Second, ready)

	mustKubectl(t, "", "delete", "namespace", gone, "--wait=false")
	eventually(t, 120*time.Second, func() string {
		if out, err := kubectl(t, "", "get", "namespace", gone, "-o", "jsonpath={.status.phase} {.status.conditions}"); err == nil || !strings.Contains(err.Error(), "NotFound") {
			return fmt.Sprintf("namespace %s still there: %s %v", gone, out, err)
		}
		if got := views(gone); got != "" {
			return fmt.Sprintf("the namespace is gone, views in it remain: %s", got)
		}
		return ""
	})
	if msg := expect(kept, "c", "c-out=3")(); msg != "" {
		t.Fatal(msg)
	}
	eventually(t, 30*time.Second, ready)

	// The same name again: a new namespace, served at once.
	mustKubectl(t, "", "create", "namespace", gone)
	mustKubectl(t, nsSourceYAML(gone, "d", "4"), "apply", "-f", "-")
	eventually(t, 30*time.Second, expect(gone, "d", "d-out=4"))
	eventually(t, 30*time.Second, ready)
}
