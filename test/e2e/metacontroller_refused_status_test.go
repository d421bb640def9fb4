package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// boundedCRD is a CRD whose schema bounds status.blob to 16 characters, so
// that the API server refuses a status write with a longer one.
const boundedCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: boundeds.e2e.dcontroller.io
spec:
  group: e2e.dcontroller.io
  scope: Namespaced
  names: {kind: Bounded, plural: boundeds, singular: bounded, listKind: BoundedList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
          properties:
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
              properties:
                blob: {type: string, maxLength: 16}
`

const boundedCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: bounded-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: boundeds
  hooks:
    sync:
      webhook:
        url: %s
`

// TestMetacontrollerRefusedParentStatus: when the API server refuses the
// status a sync hook returns (here longer than the CRD's schema allows),
// the parent keeps the status it has and gets the Synced=False condition
// of reason ParentWriteFailed with the API server's words, next to the
// SyncError Event; when the hook's status is accepted again, it replaces
// the condition.
func TestMetacontrollerRefusedParentStatus(t *testing.T) {
	const ns = "e2e-mc-refused-status"
	mustKubectl(t, boundedCRD, "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/boundeds.e2e.dcontroller.io")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	hook := newHookServer(t, func(req map[string]any) any {
		return map[string]any{"status": map[string]any{"blob": path(req, "parent.spec.blob")}, "children": []any{}}
	})
	applyMC(t, fmt.Sprintf(boundedCC, hook.URL))

	parent := func(blob string) string {
		return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: Bounded\nmetadata: {name: b, namespace: %s}\nspec: {blob: %q}\n", ns, blob)
	}
	// status returns the parent's status.blob and its Synced condition.
	status := func() (string, map[string]any) {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Bounded", ns, "b")
		if err != nil {
			return "", nil
		}
		conds, _ := path(p.Object, "status.conditions").([]any)
		for _, c := range conds {
			if cm, ok := c.(map[string]any); ok && cm["type"] == "Synced" {
				return str(path(p.Object, "status.blob")), cm
			}
		}
		return str(path(p.Object, "status.blob")), nil
	}

	mustKubectl(t, parent("short"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if blob, cond := status(); blob != "short" || cond != nil {
			return fmt.Sprintf("status.blob %q, Synced condition %v; want \"short\" and none", blob, cond)
		}
		return ""
	})

	mustKubectl(t, parent(strings.Repeat("x", 40)), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		blob, cond := status()
		if blob != "short" {
			return fmt.Sprintf("status.blob %q, want the last accepted one, \"short\"", blob)
		}
		if cond == nil || cond["status"] != "False" || cond["reason"] != "ParentWriteFailed" ||
			!strings.Contains(str(cond["message"]), "status.blob") {
			return fmt.Sprintf("Synced condition %v, want False, ParentWriteFailed, naming status.blob", cond)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		out, _ := kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "reason=SyncError,involvedObject.name=b", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(out, "ParentWriteFailed") {
			return fmt.Sprintf("SyncError Events %q, want one starting with ParentWriteFailed", out)
		}
		return ""
	})

	mustKubectl(t, parent("again"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if blob, cond := status(); blob != "again" || cond != nil {
			return fmt.Sprintf("status.blob %q, Synced condition %v; want \"again\" and none", blob, cond)
		}
		return ""
	})
}

// TestMetacontrollerNoStatusObservedGeneration: for a parent whose CRD has
// no status subresource, the status write (an update of the whole object)
// bumps metadata.generation; the status's observedGeneration is the
// generation that write makes, so observedGeneration == generation once
// the parent is synced (what kubectl wait and rollout scripts compare),
// after a spec change too, and the parent then stays as it is.
func TestMetacontrollerNoStatusObservedGeneration(t *testing.T) {
	const ns = "e2e-mc-nostatus-generation"
	mustKubectl(t, crdYAMLNoStatus("Plain", "plains", "Namespaced"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/plains.e2e.dcontroller.io")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		return map[string]any{"status": map[string]any{"seen": path(req, "parent.spec.v")}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: plain-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: plains}
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL))
	parent := func(v string) string {
		return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: Plain\nmetadata: {name: p, namespace: %s}\nspec: {v: %s}\n", ns, v)
	}
	synced := func(v string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "Plain", ns, "p")
			if err != nil {
				return err.Error()
			}
			og, _ := path(p.Object, "status.observedGeneration").(int64)
			if str(path(p.Object, "status.seen")) != v || og != p.GetGeneration() {
				return fmt.Sprintf("status %v at generation %d, want seen=%s and observedGeneration %d",
					p.Object["status"], p.GetGeneration(), v, p.GetGeneration())
			}
			return ""
		}
	}
	mustKubectl(t, parent("one"), "apply", "-f", "-")
	eventually(t, 30*time.Second, synced("one"))
	stable(t, h, 2*time.Second)
	mustKubectl(t, parent("two"), "apply", "-f", "-")
	eventually(t, 30*time.Second, synced("two"))
	stable(t, h, 2*time.Second)
	if msg := synced("two")(); msg != "" {
		t.Errorf("after the parent settled: %s", msg)
	}
}
