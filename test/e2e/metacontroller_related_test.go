package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const propagationCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: configmap-propagation
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: configmappropagations
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    customize:
      webhook: {url: %[1]s/customize}
    sync:
      webhook: {url: %[1]s/sync}
`

// TestMetacontrollerConfigMapPropagation: a cluster-scoped parent copies
// one ConfigMap (a related object chosen by the customize hook) into the
// namespaces it lists. The copies are namespaced children of a
// cluster-scoped parent (v1 keys "<namespace>/<name>"); a change of the
// source resyncs the parent and updates the copies; a deleted copy (an
// event of a namespaced child of a cluster-scoped parent) is recreated.
func TestMetacontrollerConfigMapPropagation(t *testing.T) {
	installCRD(t, "ConfigMapPropagation", "configmappropagations", "Cluster")
	for _, ns := range []string{"e2e-mc-src", "e2e-mc-t1", "e2e-mc-t2"} {
		mustKubectl(t, "", "create", "namespace", ns)
	}
	mustKubectl(t, "", "-n", "e2e-mc-src", "create", "configmap", "settings", "--from-literal=color=blue")
	startManager(t)

	var mu sync.Mutex
	var childKeys []string
	customize := func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		return map[string]any{"relatedResources": []any{map[string]any{
			"apiVersion": "v1", "resource": "configmaps",
			"namespace": path(parent, "spec.sourceNamespace"),
			"names":     []any{path(parent, "spec.sourceName")},
		}}}
	}
	sync := func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		related, _ := path(req, "related").(map[string]any)["ConfigMap.v1"].(map[string]any)
		observed, _ := path(req, "children").(map[string]any)["ConfigMap.v1"].(map[string]any)
		mu.Lock()
		childKeys = childKeys[:0]
		for k := range observed {
			childKeys = append(childKeys, k)
		}
		mu.Unlock()
		src := related[str(path(parent, "spec.sourceNamespace"))+"/"+str(path(parent, "spec.sourceName"))]
		var children []any
		if src != nil {
			targets, _ := path(parent, "spec.targetNamespaces").([]any)
			for _, ns := range targets {
				children = append(children, map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": path(parent, "spec.sourceName"), "namespace": ns},
					"data":     path(src.(map[string]any), "data"),
				})
			}
		}
		return map[string]any{"status": map[string]any{"copies": len(observed)}, "children": children}
	}
	h := newHookServer(t, func(req map[string]any) any {
		if _, ok := req["children"]; ok {
			return sync(req)
		}
		return customize(req)
	})
	applyMC(t, fmt.Sprintf(propagationCC, h.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: ConfigMapPropagation
metadata:
  name: settings
spec:
  sourceName: settings
  sourceNamespace: e2e-mc-src
  targetNamespaces: [e2e-mc-t1, e2e-mc-t2]
`, "apply", "-f", "-")

	copies := func(want string) func() string {
		return func() string {
			for _, ns := range []string{"e2e-mc-t1", "e2e-mc-t2"} {
				if v, err := cmData(t, ns, "settings", "color"); err != nil || v != want {
					return fmt.Sprintf("%s/settings color %q (%v)", ns, v, err)
				}
			}
			p, err := getObj(t, "e2e.dcontroller.io/v1", "ConfigMapPropagation", "", "settings")
			if err != nil || str(path(p.Object, "status.copies")) != "2" {
				return fmt.Sprintf("status %v (%v)", p.Object["status"], err)
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, copies("blue"))
	mu.Lock()
	keys := strings.Join(childKeys, ",")
	mu.Unlock()
	if !strings.Contains(keys, "e2e-mc-t1/settings") || !strings.Contains(keys, "e2e-mc-t2/settings") {
		t.Errorf("v1 child keys of a cluster-scoped parent: %q, want <namespace>/<name>", keys)
	}

	// The related source changes: the copies follow.
	mustKubectl(t, "", "-n", "e2e-mc-src", "patch", "configmap", "settings", "--type=merge", "-p", `{"data":{"color":"green"}}`)
	eventually(t, 30*time.Second, copies("green"))

	// A namespaced child of the cluster-scoped parent is deleted: its
	// event reaches the parent, which recreates it.
	cm, _ := getObj(t, "v1", "ConfigMap", "e2e-mc-t2", "settings")
	mustKubectl(t, "", "-n", "e2e-mc-t2", "delete", "configmap", "settings")
	eventually(t, 30*time.Second, func() string {
		n, err := getObj(t, "v1", "ConfigMap", "e2e-mc-t2", "settings")
		if err != nil {
			return err.Error()
		}
		if n.GetUID() == cm.GetUID() {
			return "not recreated yet"
		}
		return ""
	})
	eventually(t, 30*time.Second, copies("green"))
	stable(t, h, 2*time.Second)
}

// TestMetacontrollerRelatedNamespaceSelector: a related rule with names and
// a namespaceSelector selects the named objects of the namespaces whose
// labels match; labelling another namespace resyncs the parent.
func TestMetacontrollerRelatedNamespaceSelector(t *testing.T) {
	installCRD(t, "Census", "censuses", "Cluster")
	for _, ns := range []string{"e2e-mc-nsa", "e2e-mc-nsb"} {
		mustKubectl(t, "", "create", "namespace", ns)
		mustKubectl(t, "", "-n", ns, "create", "configmap", "owner", "--from-literal=team="+ns)
	}
	mustKubectl(t, "", "label", "namespace", "e2e-mc-nsa", "census=yes")
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		if _, ok := req["children"]; !ok {
			return map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps", "names": []any{"owner"},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"census": "yes"}},
			}}}
		}
		related, _ := path(req, "related").(map[string]any)["ConfigMap.v1"].(map[string]any)
		var keys []string
		for k := range related {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return map[string]any{"status": map[string]any{"counted": strings.Join(keys, ",")}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: census}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: censuses}
  hooks:
    customize: {webhook: {url: %[1]s}}
    sync: {webhook: {url: %[1]s}}
`, h.URL))
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1\nkind: Census\nmetadata: {name: all}\n", "apply", "-f", "-")
	counted := func(want string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "Census", "", "all")
			if err != nil {
				return err.Error()
			}
			if got := str(path(p.Object, "status.counted")); got != want {
				return "counted " + got
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, counted("e2e-mc-nsa/owner"))
	mustKubectl(t, "", "label", "namespace", "e2e-mc-nsb", "census=yes")
	eventually(t, 30*time.Second, counted("e2e-mc-nsa/owner,e2e-mc-nsb/owner"))
}
