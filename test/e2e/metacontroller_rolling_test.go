package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

const rollSetCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: rollset-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: rollsets
    revisionHistory:
      fieldPaths: [spec.template]
  childResources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: workers
      updateStrategy:
        method: RollingRecreate
        statusChecks:
          conditions:
            - type: Ready
              status: "True"
  hooks:
    sync:
      webhook: {url: %s}
`

func rollSetYAML(version string) string {
	return `apiVersion: e2e.dcontroller.io/v1
kind: RollSet
metadata:
  name: web
  namespace: e2e-mc-rolling
spec:
  replicas: 3
  template: {version: ` + version + "}\n"
}

// rollSetHook returns spec.replicas Workers at the parent's template
// version.
func rollSetHook(req map[string]any) any {
	parent, _ := req["parent"].(map[string]any)
	n, _ := path(parent, "spec.replicas").(float64)
	var children []any
	for i := 0; i < int(n); i++ {
		children = append(children, map[string]any{
			"apiVersion": "e2e.dcontroller.io/v1", "kind": "Worker",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", path(parent, "metadata.name"), i)},
			"spec":     map[string]any{"version": path(parent, "spec.template.version")},
		})
	}
	return map[string]any{"children": children}
}

// TestMetacontrollerRollingRecreate: a RollingRecreate rollout with a Ready
// status check recreates one Worker at a time, pauses while the updated
// Worker is not Ready (also across a manager restart, thanks to the
// ControllerRevisions), and resumes when it is.
func TestMetacontrollerRollingRecreate(t *testing.T) {
	const ns = "e2e-mc-rolling"
	installCRD(t, "Worker", "workers", "Namespaced")
	installCRD(t, "RollSet", "rollsets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	stop := startManager(t)
	h := newHookServer(t, rollSetHook)
	applyMC(t, fmt.Sprintf(rollSetCC, h.URL))
	mustKubectl(t, rollSetYAML("v1"), "apply", "-f", "-")

	versions := func() string {
		var out []string
		for _, w := range listObjs(t, "e2e.dcontroller.io/v1", "Worker", ns) {
			if w.GetDeletionTimestamp() == nil {
				out = append(out, w.GetName()+"="+str(path(w.Object, "spec.version")))
			}
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	want := func(v string) func() string {
		return func() string {
			if got := versions(); got != v {
				return "workers " + got + ", want " + v
			}
			return ""
		}
	}
	ready := func(name string) {
		mustKubectl(t, "", "-n", ns, "patch", "workers.e2e.dcontroller.io", name, "--subresource=status", "--type=merge",
			"-p", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	}
	revisions := func() int {
		return len(listObjs(t, "metacontroller.k8s.io/v1alpha1", "ControllerRevision", ns))
	}

	eventually(t, 30*time.Second, want("web-0=v1,web-1=v1,web-2=v1"))
	for _, w := range []string{"web-0", "web-1", "web-2"} {
		ready(w)
	}
	if n := revisions(); n != 1 {
		t.Errorf("%d ControllerRevisions, want 1", n)
	}

	mustKubectl(t, rollSetYAML("v2"), "apply", "-f", "-")
	eventually(t, 30*time.Second, want("web-0=v2,web-1=v1,web-2=v1"))
	if n := revisions(); n != 2 {
		t.Errorf("%d ControllerRevisions during the rollout, want 2", n)
	}
	time.Sleep(2 * time.Second)
	if got := versions(); got != "web-0=v2,web-1=v1,web-2=v1" {
		t.Fatalf("the rollout went on while web-0 is not Ready: %s", got)
	}

	// A new manager resumes from the recorded revisions: still paused.
	stop()
	startManager(t)
	time.Sleep(3 * time.Second)
	if got := versions(); got != "web-0=v2,web-1=v1,web-2=v1" {
		t.Fatalf("after a restart: %s", got)
	}

	ready("web-0")
	eventually(t, 30*time.Second, want("web-0=v2,web-1=v2,web-2=v1"))
	time.Sleep(time.Second)
	if got := versions(); got != "web-0=v2,web-1=v2,web-2=v1" {
		t.Fatalf("the rollout went on while web-1 is not Ready: %s", got)
	}
	ready("web-1")
	eventually(t, 30*time.Second, want("web-0=v2,web-1=v2,web-2=v2"))
	ready("web-2")
	eventually(t, 30*time.Second, func() string {
		if n := revisions(); n != 1 {
			return fmt.Sprintf("%d ControllerRevisions after the rollout, want 1", n)
		}
		return ""
	})
	stable(t, h, 2*time.Second)
}

// TestMetacontrollerRollingInPlace: RollingInPlace updates one Worker at a
// time in place (same UID) and pauses while an updated Worker is not Ready.
func TestMetacontrollerRollingInPlace(t *testing.T) {
	const ns = "e2e-mc-rolling-inplace"
	installCRD(t, "Worker", "workers", "Namespaced")
	installCRD(t, "RollSet", "rollsets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, rollSetHook)
	applyMC(t, strings.ReplaceAll(strings.Replace(fmt.Sprintf(rollSetCC, h.URL), "RollingRecreate", "RollingInPlace", 1),
		"rollset-controller", "rollset-inplace"))
	parent := func(v string) string { return strings.Replace(rollSetYAML(v), "e2e-mc-rolling", ns, 1) }
	mustKubectl(t, parent("v1"), "apply", "-f", "-")
	state := func() string {
		var out []string
		for _, w := range listObjs(t, "e2e.dcontroller.io/v1", "Worker", ns) {
			out = append(out, w.GetName()+"="+str(path(w.Object, "spec.version")))
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	want := func(v string) func() string {
		return func() string {
			if got := state(); got != v {
				return "workers " + got + ", want " + v
			}
			return ""
		}
	}
	ready := func(name string) {
		mustKubectl(t, "", "-n", ns, "patch", "workers.e2e.dcontroller.io", name, "--subresource=status", "--type=merge",
			"-p", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
	}
	eventually(t, 30*time.Second, want("web-0=v1,web-1=v1,web-2=v1"))
	uids := map[string]string{}
	for _, w := range listObjs(t, "e2e.dcontroller.io/v1", "Worker", ns) {
		uids[w.GetName()] = string(w.GetUID())
	}
	ready("web-0") // web-1 and web-2 are not Ready

	// web-0 is updated and stays Ready, so web-1 follows; web-1 is not
	// Ready, so the rollout pauses before web-2.
	mustKubectl(t, parent("v2"), "apply", "-f", "-")
	eventually(t, 30*time.Second, want("web-0=v2,web-1=v2,web-2=v1"))
	time.Sleep(2 * time.Second)
	if got := state(); got != "web-0=v2,web-1=v2,web-2=v1" {
		t.Fatalf("the rollout went on while web-1 is not Ready: %s", got)
	}
	ready("web-1")
	eventually(t, 30*time.Second, want("web-0=v2,web-1=v2,web-2=v2"))
	for _, w := range listObjs(t, "e2e.dcontroller.io/v1", "Worker", ns) {
		if uids[w.GetName()] != string(w.GetUID()) {
			t.Errorf("%s was recreated; RollingInPlace updates in place", w.GetName())
		}
	}
}
