package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const strategyCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: strategy-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: strategies
    ignoreStatusChanges: true
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: Recreate}
    - apiVersion: v1
      resource: secrets
  hooks:
    sync:
      webhook: {url: %s}
`

func strategyYAML(v string) string {
	return "apiVersion: e2e.dcontroller.io/v1\nkind: Strategy\nmetadata: {name: s, namespace: e2e-mc-strategy}\nspec: {v: \"" + v + "\"}\n"
}

// TestMetacontrollerUpdateStrategies: Recreate replaces a differing child
// (new UID), OnDelete (the default) never updates an existing child but
// recreates it in the desired state once someone deletes it; with
// ignoreStatusChanges a change of the parent's status alone syncs nothing.
func TestMetacontrollerUpdateStrategies(t *testing.T) {
	const ns = "e2e-mc-strategy"
	installCRD(t, "Strategy", "strategies", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		v := str(path(req, "parent.spec.v"))
		return map[string]any{"status": map[string]any{"v": v}, "children": []any{
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "s-cm"}, "data": map[string]any{"v": v}},
			map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s-secret"}, "stringData": map[string]any{"v": v}},
		}}
	})
	applyMC(t, fmt.Sprintf(strategyCC, h.URL))
	mustKubectl(t, strategyYAML("1"), "apply", "-f", "-")
	secretV := func() string {
		s, err := getObj(t, "v1", "Secret", ns, "s-secret")
		if err != nil {
			return err.Error()
		}
		return str(path(s.Object, "data.v")) // base64
	}
	eventually(t, 30*time.Second, func() string {
		if v, err := cmData(t, ns, "s-cm", "v"); err != nil || v != "1" {
			return fmt.Sprintf("s-cm %q %v", v, err)
		}
		if s := secretV(); s != "MQ==" {
			return "s-secret " + s
		}
		return ""
	})
	cm, _ := getObj(t, "v1", "ConfigMap", ns, "s-cm")
	secret, _ := getObj(t, "v1", "Secret", ns, "s-secret")

	mustKubectl(t, strategyYAML("2"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		now, err := getObj(t, "v1", "ConfigMap", ns, "s-cm")
		if err != nil || now.GetUID() == cm.GetUID() || str(path(now.Object, "data.v")) != "2" {
			return fmt.Sprintf("s-cm not recreated at v=2 (%v)", err)
		}
		return ""
	})
	time.Sleep(time.Second)
	if now, _ := getObj(t, "v1", "Secret", ns, "s-secret"); now.GetResourceVersion() != secret.GetResourceVersion() {
		t.Error("OnDelete child updated")
	}

	// A status-only change of the parent is ignored.
	settle(t, h.calls.Load)
	calls := h.calls.Load()
	mustKubectl(t, "", "-n", ns, "patch", "strategies.e2e.dcontroller.io", "s", "--subresource=status", "--type=merge", "-p", `{"status":{"note":"x"}}`)
	time.Sleep(2 * time.Second)
	if n := h.calls.Load() - calls; n != 0 {
		t.Errorf("%d hook calls for a status-only change with ignoreStatusChanges", n)
	}

	mustKubectl(t, "", "-n", ns, "delete", "secret", "s-secret")
	eventually(t, 30*time.Second, func() string {
		if s := secretV(); s != "Mg==" {
			return "s-secret " + s
		}
		return ""
	})
}

// TestMetacontrollerStatusWithoutSubresource: a parent kind without a status
// subresource gets its status through an update of the whole object, and
// the generation bump that causes does not make the controller write again.
func TestMetacontrollerStatusWithoutSubresource(t *testing.T) {
	const ns = "e2e-mc-nostatus"
	crd := strings.Replace(crdYAML("Plain", "plains", "Namespaced"), "      subresources: {status: {}}\n", "", 1)
	mustKubectl(t, crd, "apply", "-f", "-")
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
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1\nkind: Plain\nmetadata: {name: p, namespace: "+ns+"}\nspec: {v: one}\n", "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Plain", ns, "p")
		if err != nil || str(path(p.Object, "status.seen")) != "one" {
			return fmt.Sprintf("status %v (%v)", p.Object["status"], err)
		}
		return ""
	})
	stable(t, h, 2*time.Second)
}
