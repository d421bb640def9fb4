package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// ccReady returns "<status> <reason>" of the Ready condition of a
// CompositeController and its message.
func ccReady(t *testing.T, name string) (string, string) {
	t.Helper()
	out, err := kubectl(t, "", "get", "compositecontroller", name, "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}|{.status.conditions[?(@.type=="Ready")].message}`)
	if err != nil {
		return "error", err.Error()
	}
	st, msg, _ := strings.Cut(out, "|")
	return st, msg
}

// waitReady waits until the Ready condition of a CompositeController is
// want ("True Running", "False KindNotFound") with a message that
// contains msg, and returns how long that took.
func waitReady(t *testing.T, name, want, msg string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, timeout, func() string {
		if st, m := ccReady(t, name); st != want || !strings.Contains(m, msg) {
			return fmt.Sprintf("Ready %q (%s), want %q with %q", st, m, want, msg)
		}
		return ""
	})
	return time.Since(start)
}

// echoHook returns one child of apiVersion/kind named after the parent,
// with the label its selector asks for (kindParent).
func echoHook(apiVersion, kind string) func(req map[string]any) any {
	return func(req map[string]any) any {
		name := str(path(req, "parent.metadata.name"))
		return map[string]any{"children": []any{map[string]any{
			"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": name + "-child", "labels": map[string]any{"parent": name}},
			"data":     map[string]any{"parent": name},
		}}}
	}
}

const kindCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: %s}
  childResources:
    - {apiVersion: %s, resource: %s}
  hooks:
    sync:
      webhook:
        url: %s
`

func kindParent(kind, ns, name string) string {
	return fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: %[1]s\nmetadata: {name: %[2]s, namespace: %[3]s}\nspec: {selector: {matchLabels: {parent: %[2]s}}}\n", kind, name, ns)
}

// waitChild waits for a child of the parent name (echoHook).
func waitChild(t *testing.T, apiVersion, kind, ns, name string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() string {
		if _, err := getObj(t, apiVersion, kind, ns, name+"-child"); err != nil {
			return err.Error()
		}
		return ""
	})
}

// TestMetacontrollerChildKindInstalledLater: a CompositeController whose
// child kind's CRD is not installed is Ready=False KindNotFound (with an
// Event of that reason) and not InvalidSpec, since its start is retried;
// once the CRD is applied it starts by itself and syncs its parents.
func TestMetacontrollerChildKindInstalledLater(t *testing.T) {
	const ns = "e2e-mc-kindlater"
	installCRD(t, "Crate", "crates", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, echoHook("e2e.dcontroller.io/v1", "Slat"))
	applyMC(t, fmt.Sprintf(kindCC, "crate-controller", "crates", "e2e.dcontroller.io/v1", "slats", h.URL))
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "crd", "slats.e2e.dcontroller.io", "--ignore-not-found", "--wait=true", "--timeout=60s")
	})

	took := waitReady(t, "crate-controller", "False KindNotFound", `spec.childResources[0]: resource "slats"`, 30*time.Second)
	t.Logf("KindNotFound reported after %s", took)
	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name=crate-controller,reason=KindNotFound", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "spec.childResources[0]") {
			return "no KindNotFound event: " + ev
		}
		return ""
	})
	if ev := mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name=crate-controller,reason=InvalidSpec", "-o", "name"); ev != "" {
		t.Errorf("InvalidSpec events for a kind not served yet: %s", ev)
	}

	installCRD(t, "Slat", "slats", "Namespaced")
	took = waitReady(t, "crate-controller", "True Running", "", 90*time.Second)
	t.Logf("Running %s after the child CRD was established", took)
	mustKubectl(t, kindParent("Crate", ns, "crate1"), "apply", "-f", "-")
	waitChild(t, "e2e.dcontroller.io/v1", "Slat", ns, "crate1", 30*time.Second)
}

// TestMetacontrollerParentCRDDeleted: when the parent CRD of a running
// CompositeController is deleted, its Ready condition turns False
// KindNotFound within seconds, naming the resource, while another
// controller keeps running and syncing; once the CRD is created again the
// controller runs again and syncs a new parent.
func TestMetacontrollerParentCRDDeleted(t *testing.T) {
	const ns = "e2e-mc-parentgone"
	installCRD(t, "Tote", "totes", "Namespaced")
	installCRD(t, "Bin", "bins", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, echoHook("v1", "ConfigMap"))
	applyMC(t, fmt.Sprintf(kindCC, "tote-controller", "totes", "v1", "configmaps", h.URL))
	applyMC(t, fmt.Sprintf(kindCC, "bin-controller", "bins", "v1", "configmaps", h.URL))
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "crd", "totes.e2e.dcontroller.io", "bins.e2e.dcontroller.io", "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	mustKubectl(t, kindParent("Tote", ns, "tote1"), "apply", "-f", "-")
	mustKubectl(t, kindParent("Bin", ns, "bin1"), "apply", "-f", "-")
	waitChild(t, "v1", "ConfigMap", ns, "tote1", 30*time.Second)
	waitChild(t, "v1", "ConfigMap", ns, "bin1", 30*time.Second)
	waitReady(t, "tote-controller", "True Running", "", 30*time.Second)
	waitReady(t, "bin-controller", "True Running", "", 30*time.Second)

	mustKubectl(t, "", "delete", "crd", "totes.e2e.dcontroller.io", "--wait=true", "--timeout=60s")
	took := waitReady(t, "tote-controller", "False KindNotFound", "spec.parentResource: e2e.dcontroller.io/v1, Kind=Tote is no longer served", 20*time.Second)
	t.Logf("KindNotFound %s after the parent CRD was gone", took)
	eventually(t, 30*time.Second, func() string {
		ev := mustKubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name=tote-controller,reason=KindNotFound", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(ev, "spec.parentResource") {
			return "no KindNotFound event: " + ev
		}
		return ""
	})
	// The other controller keeps running and syncing.
	if st, msg := ccReady(t, "bin-controller"); st != "True Running" {
		t.Errorf("bin-controller: Ready %q (%s)", st, msg)
	}
	mustKubectl(t, kindParent("Bin", ns, "bin2"), "apply", "-f", "-")
	waitChild(t, "v1", "ConfigMap", ns, "bin2", 30*time.Second)

	installCRD(t, "Tote", "totes", "Namespaced")
	took = waitReady(t, "tote-controller", "True Running", "", 90*time.Second)
	t.Logf("Running %s after the parent CRD was established again", took)
	mustKubectl(t, kindParent("Tote", ns, "tote2"), "apply", "-f", "-")
	waitChild(t, "v1", "ConfigMap", ns, "tote2", 30*time.Second)
	if st, msg := ccReady(t, "bin-controller"); st != "True Running" {
		t.Errorf("bin-controller at the end: Ready %q (%s)", st, msg)
	}
}
