package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestMetacontrollerServerExtendedChild: a Recreate child whose fields
// the API server extends (admission adds the not-ready/unreachable
// tolerations), rewrites (a CPU quantity stored as "1") or drops (zero
// values) is created once and then left alone: no recreate, no hot loop of
// hook calls. A real change of the hook's answer still recreates it.
func TestMetacontrollerServerExtendedChild(t *testing.T) {
	const ns = "e2e-mc-extended"
	installCRD(t, "Crawler", "crawlers", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		image := str(path(req, "parent.spec.image"))
		return map[string]any{"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "crawler"},
			"spec": map[string]any{
				"tolerations": []any{map[string]any{"key": "nodeType", "operator": "Equal", "value": "crawling", "effect": "NoSchedule"}},
				"hostNetwork": false,
				"containers": []any{map[string]any{
					"name": "main", "image": image,
					"resources": map[string]any{"limits": map[string]any{"cpu": "1000m", "memory": "1024Mi"}},
					"env":       []any{},
				}},
			},
		}}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: crawler-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: crawlers}
  childResources:
    - apiVersion: v1
      resource: pods
      updateStrategy: {method: Recreate}
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL))
	parent := func(image string) string {
		return "apiVersion: e2e.dcontroller.io/v1\nkind: Crawler\nmetadata: {name: c, namespace: " + ns + "}\nspec: {image: " + image + "}\n"
	}
	mustKubectl(t, parent("busybox:1"), "apply", "-f", "-")
	var uid string
	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "v1", "Pod", ns, "crawler")
		if err != nil {
			return err.Error()
		}
		uid = string(p.GetUID())
		return ""
	})
	stable(t, h, 3*time.Second)
	p, err := getObj(t, "v1", "Pod", ns, "crawler")
	if err != nil {
		t.Fatal(err)
	}
	if string(p.GetUID()) != uid {
		t.Fatalf("pod recreated with nothing changed: uid %s, first %s", p.GetUID(), uid)
	}
	// The API server really did extend and rewrite the child.
	tols, _ := path(p.Object, "spec.tolerations").([]any)
	if len(tols) < 2 {
		t.Fatalf("tolerations %v: want ours plus the ones admission adds", tols)
	}
	if cpu := str(path(container0(p.Object), "resources.limits.cpu")); cpu != "1" {
		t.Fatalf("stored cpu limit %q, want the canonical \"1\"", cpu)
	}

	// A real change recreates the child once, with the new image.
	mustKubectl(t, parent("busybox:2"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "v1", "Pod", ns, "crawler")
		if err != nil {
			return err.Error()
		}
		if string(p.GetUID()) == uid || str(container0(p.Object)["image"]) != "busybox:2" {
			return "pod not recreated with busybox:2"
		}
		uid = string(p.GetUID())
		return ""
	})
	stable(t, h, 3*time.Second)
	if p, err := getObj(t, "v1", "Pod", ns, "crawler"); err != nil || string(p.GetUID()) != uid {
		t.Fatalf("pod recreated again after the change settled (%v)", err)
	}
}

// container0 is the first container of a Pod (nil when there is none).
func container0(pod map[string]any) map[string]any {
	cs, _ := path(pod, "spec.containers").([]any)
	if len(cs) == 0 {
		return nil
	}
	c, _ := cs[0].(map[string]any)
	return c
}
