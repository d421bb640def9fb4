package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const tallyCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: tally-controller
  annotations: {%s}
spec:
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: tallies
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync:
      webhook: {url: %s}
`

func tallyYAML(items string) string {
	return `apiVersion: e2e.dcontroller.io/v1
kind: Tally
metadata: {name: bundle1, namespace: e2e-mc-calls}
spec:
  selector:
    matchLabels: {bundle: bundle1}
  items: ` + items + "\n"
}

// TestMetacontrollerSyncAfterWrites counts hook calls: by default a change
// that updates the children costs the call for the change and a follow-up
// that observes the updated children (so the status, computed from the
// observed children, catches up), and one more if that changed the
// status; with the annotation
// dcontroller.io/sync-after-writes: "false" it costs exactly one call and
// the status catches up at the next change. An invalid annotation value is
// reported in the controller's Ready condition with its path.
func TestMetacontrollerSyncAfterWrites(t *testing.T) {
	const ns = "e2e-mc-calls"
	installCRD(t, "Tally", "tallies", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, bundleHook(""))
	applyMC(t, fmt.Sprintf(tallyCC, "", h.URL))

	status := func(want string) func() string {
		return func() string {
			p, err := getObj(t, "e2e.dcontroller.io/v1", "Tally", ns, "bundle1")
			if err != nil {
				return err.Error()
			}
			if got := str(path(p.Object, "status.count")); got != want {
				return "status.count=" + got + ", want " + want
			}
			return ""
		}
	}
	children := func(want string) func() string {
		return func() string {
			var got []string
			for _, o := range listObjs(t, "v1", "ConfigMap", ns) {
				if v := str(path(o.Object, "data.value")); v != "" {
					got = append(got, o.GetName()+"="+v)
				}
			}
			if s := strings.Join(got, ","); s != want {
				return "children " + s + ", want " + want
			}
			return ""
		}
	}
	mustKubectl(t, tallyYAML("{a: '1'}"), "apply", "-f", "-")
	eventually(t, 30*time.Second, children("bundle1-a=1"))
	eventually(t, 30*time.Second, status("1"))
	settle(t, h.calls.Load)

	// Default: the change; the follow-up with the new children, whose
	// answer changes the status (count 1 -> 2); the follow-up with that
	// status (the hook is sent its parent's status changes, as in
	// Metacontroller, unless parentResource.ignoreStatusChanges).
	c0 := h.calls.Load()
	mustKubectl(t, tallyYAML("{a: '2', b: '2'}"), "apply", "-f", "-")
	eventually(t, 30*time.Second, children("bundle1-a=2,bundle1-b=2"))
	eventually(t, 30*time.Second, status("2"))
	settle(t, h.calls.Load)
	if n := h.calls.Load() - c0; n != 3 {
		t.Errorf("default: %d hook calls for a change that updates the children and the status, want 3 (change + 2 follow-ups)", n)
	}

	// Follow-up off: one call per change; the status reflects the children
	// the hook observed, i.e. before its own writes.
	applyMC(t, fmt.Sprintf(tallyCC, `dcontroller.io/sync-after-writes: "false"`, h.URL))
	time.Sleep(2 * time.Second) // the controller restarts and resends the parent once
	settle(t, h.calls.Load)
	c0 = h.calls.Load()
	mustKubectl(t, tallyYAML("{a: '3', b: '3', c: '3'}"), "apply", "-f", "-")
	eventually(t, 30*time.Second, children("bundle1-a=3,bundle1-b=3,bundle1-c=3"))
	settle(t, h.calls.Load)
	if n := h.calls.Load() - c0; n != 1 {
		t.Errorf("sync-after-writes=false: %d hook calls for a change that updates the children, want 1", n)
	}
	if msg := status("2")(); msg != "" {
		t.Errorf("sync-after-writes=false: %s (the hook observed two children)", msg)
	}
	// A foreign change to a child is still a change: the hook is called
	// and sees all three.
	mustKubectl(t, "", "-n", ns, "label", "configmap", "bundle1-a", "extra=x")
	eventually(t, 30*time.Second, status("3"))

	// An invalid value stops the controller with a readable reason.
	applyMC(t, fmt.Sprintf(tallyCC, `dcontroller.io/sync-after-writes: "sometimes"`, h.URL))
	eventually(t, 30*time.Second, func() string {
		out := mustKubectl(t, "", "get", "compositecontroller", "tally-controller",
			"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		if !strings.HasPrefix(out, "False ") || !strings.Contains(out, `metadata.annotations["dcontroller.io/sync-after-writes"]`) {
			return "Ready condition: " + out
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name=tally-controller,reason=InvalidSpec", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "sync-after-writes") {
			return "no InvalidSpec event: " + ev
		}
		return ""
	})
	// kubectl get shows it in the printer columns.
	out := mustKubectl(t, "", "get", "compositecontroller", "tally-controller")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		strings.Join(strings.Fields(lines[0]), " ") != "NAME READY REASON AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "tally-controller False InvalidSpec ") {
		t.Errorf("kubectl get compositecontroller:\n%s", out)
	}
}
