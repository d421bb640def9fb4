package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// bundleHook maps a Bundle (spec.items: name -> value) to one ConfigMap per
// item and reports the number of observed ConfigMaps in the status.
func bundleHook(suffix string) func(req map[string]any) any {
	return func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		name := str(path(parent, "metadata.name"))
		items, _ := path(parent, "spec.items").(map[string]any)
		var keys []string
		for k := range items {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var children []any
		for _, k := range keys {
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": name + "-" + k, "labels": map[string]any{"bundle": name}},
				"data":     map[string]any{"value": str(items[k]) + suffix},
			})
		}
		observed, _ := path(req, "children").(map[string]any)["ConfigMap.v1"].(map[string]any)
		return map[string]any{"status": map[string]any{"count": len(observed)}, "children": children}
	}
}

const bundleCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: bundle-controller
spec:
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: bundles
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy:
        method: InPlace
  hooks:
    sync:
      webhook:
        url: %s
`

func bundleYAML(items string) string {
	return `apiVersion: e2e.dcontroller.io/v1
kind: Bundle
metadata:
  name: bundle1
  namespace: e2e-mc-composite
spec:
  selector:
    matchLabels: {bundle: bundle1}
  items: ` + items + "\n"
}

func cmData(t *testing.T, ns, name, key string) (string, error) {
	t.Helper()
	u, err := getObj(t, "v1", "ConfigMap", ns, name)
	if err != nil {
		return "", err
	}
	return str(path(u.Object, "data."+key)), nil
}

// TestMetacontrollerCompositeLifecycle: children created, adopted, merged
// as kubectl apply would, updated in place, deleted when no longer
// returned; status written back with observedGeneration; no hot loop; a new
// webhook URL takes effect without a restart; deleting the controller
// stops it and leaves the children alone.
func TestMetacontrollerCompositeLifecycle(t *testing.T) {
	const ns = "e2e-mc-composite"
	installCRD(t, "Bundle", "bundles", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	// An orphan that matches the parent's selector, with a field the hook
	// never sets.
	mustKubectl(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: bundle1-a
  namespace: e2e-mc-composite
  labels: {bundle: bundle1}
data: {value: old, keep: me}
`, "apply", "-f", "-")
	startManager(t)
	h1 := newHookServer(t, bundleHook(""))
	applyMC(t, fmt.Sprintf(bundleCC, h1.URL))
	mustKubectl(t, bundleYAML("{a: '1', b: '2'}"), "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		a, err := getObj(t, "v1", "ConfigMap", ns, "bundle1-a")
		if err != nil {
			return err.Error()
		}
		if got := str(path(a.Object, "data.value")) + "," + str(path(a.Object, "data.keep")); got != "1,me" {
			return "bundle1-a data " + got
		}
		refs := a.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Name != "bundle1" || refs[0].Controller == nil || !*refs[0].Controller {
			return fmt.Sprintf("bundle1-a not adopted: %+v", refs)
		}
		if b, err := cmData(t, ns, "bundle1-b", "value"); err != nil || b != "2" {
			return fmt.Sprintf("bundle1-b %q %v", b, err)
		}
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Bundle", ns, "bundle1")
		if err != nil {
			return err.Error()
		}
		if c, g := str(path(p.Object, "status.count")), str(path(p.Object, "status.observedGeneration")); c != "2" || g != "1" {
			return fmt.Sprintf("status count=%s observedGeneration=%s", c, g)
		}
		return ""
	})
	// v1 keys: a namespaced parent sees its children by name.
	if kids, _ := path(h1.last(), "children").(map[string]any)["ConfigMap.v1"].(map[string]any); kids["bundle1-a"] == nil {
		t.Errorf("v1 child keys: %v, want names", kids)
	}
	b, _ := getObj(t, "v1", "ConfigMap", ns, "bundle1-b")
	if !strings.Contains(b.GetAnnotations()["metacontroller.k8s.io/last-applied-configuration"], `"value":"2"`) {
		t.Errorf("last-applied annotation: %v", b.GetAnnotations())
	}
	stable(t, h1, 2*time.Second)

	// b is no longer returned: deleted; a changes in place.
	mustKubectl(t, bundleYAML("{a: '10'}"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if v, err := cmData(t, ns, "bundle1-a", "value"); err != nil || v != "10" {
			return fmt.Sprintf("bundle1-a value %q %v", v, err)
		}
		if _, err := getObj(t, "v1", "ConfigMap", ns, "bundle1-b"); !isNotFound(err) {
			return fmt.Sprintf("bundle1-b still there (%v)", err)
		}
		return ""
	})
	a, _ := getObj(t, "v1", "ConfigMap", ns, "bundle1-a")
	uid := a.GetUID()
	// A label set by someone else survives the next syncs.
	calls := h1.calls.Load()
	mustKubectl(t, "", "-n", ns, "label", "configmap", "bundle1-a", "extra=x")
	eventually(t, 20*time.Second, func() string {
		if h1.calls.Load() == calls {
			return "no sync after the child changed"
		}
		return ""
	})
	stable(t, h1, time.Second)
	a, _ = getObj(t, "v1", "ConfigMap", ns, "bundle1-a")
	if a.GetLabels()["extra"] != "x" || a.GetUID() != uid || str(path(a.Object, "data.keep")) != "me" {
		t.Errorf("foreign fields lost: labels %v data %v", a.GetLabels(), a.Object["data"])
	}

	// A new webhook URL takes effect without a restart.
	h2 := newHookServer(t, bundleHook("-v2"))
	applyMC(t, fmt.Sprintf(bundleCC, h2.URL))
	eventually(t, 30*time.Second, func() string {
		if v, _ := cmData(t, ns, "bundle1-a", "value"); v != "10-v2" {
			return "bundle1-a value " + v
		}
		return ""
	})
	if h2.calls.Load() == 0 {
		t.Error("the new hook was never called")
	}

	// Deleting the controller stops it and leaves the children.
	mustKubectl(t, "", "delete", "compositecontroller", "bundle-controller")
	settle(t, h2.calls.Load)
	time.Sleep(2 * time.Second) // the controller stops
	before := h2.calls.Load()
	mustKubectl(t, bundleYAML("{a: '11'}"), "apply", "-f", "-")
	time.Sleep(2 * time.Second)
	if v, err := cmData(t, ns, "bundle1-a", "value"); err != nil || v != "10-v2" {
		t.Errorf("after the controller was deleted: bundle1-a value %q %v", v, err)
	}
	if h2.calls.Load() != before {
		t.Error("hook called after the controller was deleted")
	}
}
