package e2e

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// statusOperator is an Operator with one controller that writes, for each
// ConfigMap labelled role=src in namespace ns, an object of kind (a CRD of
// e2e.dcontroller.io with the status subresource) named after it, as a
// target of type typ: spec.size from the ConfigMap's data.size (Updater
// and Applier only) and status from its data; a Periodic source resyncs
// every second.
func statusOperator(name, ns, kind, typ string) string {
	spec := `
          spec: {size: "$.data.size"}`
	if typ == "Patcher" {
		spec = ""
	}
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %[1]s
spec:
  controllers:
    - name: status
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: %[2]s
          labelSelector: {matchLabels: {role: src}}
        - kind: Tick
          type: Periodic
          parameters: {period: 1s}
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"%[5]s
          status: "$.data"
      target: {apiGroup: e2e.dcontroller.io, version: v1, kind: %[3]s, type: %[4]s}
`, name, ns, kind, typ, spec)
}

// objectStatus returns the status of an object as a map of strings (nil
// when it has none or cannot be read).
func objectStatus(t *testing.T, ns, resource, name string) map[string]string {
	out, err := kubectl(t, "", "-n", ns, "get", resource, name, "-o", "jsonpath={.status}")
	if err != nil {
		return nil
	}
	return jsonMap(t, out)
}

// wantStatus is an eventually condition: the status of the object is want.
func wantStatus(t *testing.T, ns, resource, name string, want map[string]string) func() string {
	return func() string {
		if got := objectStatus(t, ns, resource, name); !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s %s/%s status %v, want %v", resource, ns, name, got, want)
		}
		return ""
	}
}

// stableResourceVersion fails the test when the object's resourceVersion
// changes within d (the controller's resyncs, every second, write nothing
// to an object already in the desired state).
func stableResourceVersion(t *testing.T, ns, resource, name string, d time.Duration) {
	t.Helper()
	rv := func() string {
		return strings.TrimSpace(mustKubectl(t, "", "-n", ns, "get", resource, name, "-o", "jsonpath={.metadata.resourceVersion}"))
	}
	before := rv()
	time.Sleep(d)
	if after := rv(); after != before {
		t.Fatalf("%s %s/%s was written while in the desired state: resourceVersion %s -> %s", resource, ns, name, before, after)
	}
}

// TestStatusUpdaterSubresource: an Updater of a kind with the status
// subresource writes the output's status through /status (the main
// endpoint drops it): the status appears with the object, follows the
// output, loses the fields the output drops (while the manager runs and
// while it is down), is restored after someone else changes a field the
// output sets, is cleared when the output stops setting one (while the
// manager runs and while it is down), and is not written again while it
// holds the output.
func TestStatusUpdaterSubresource(t *testing.T) {
	installCRD(t, "StatusWidget", "statuswidgets", "Namespaced")
	stop := startManager(t)
	ns := "e2e-status-updater"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, statusOperator("status-updater", ns, "StatusWidget", "Updater"), "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "w", "--from-literal=size=3", "--from-literal=phase=Running", "--from-literal=ready=yes", "--from-literal=extra=1")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "w", "role=src")
	res := "statuswidgets.e2e.dcontroller.io"
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "w", map[string]string{"size": "3", "phase": "Running", "ready": "yes", "extra": "1"}))
	if got := strings.TrimSpace(mustKubectl(t, "", "-n", ns, "get", res, "w", "-o", "jsonpath={.spec.size}")); got != "3" {
		t.Fatalf("spec.size %q, want 3", got)
	}
	stableResourceVersion(t, ns, res, "w", 2500*time.Millisecond)

	// The output changes a status field and drops another.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "w", "--type=merge", "-p", `{"data":{"phase":"Degraded","ready":null}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "w", map[string]string{"size": "3", "phase": "Degraded", "extra": "1"}))

	// Someone else changes a status field the output sets: restored.
	mustKubectl(t, "", "-n", ns, "patch", res, "w", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Hacked"}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "w", map[string]string{"size": "3", "phase": "Degraded", "extra": "1"}))
	stableResourceVersion(t, ns, res, "w", 2500*time.Millisecond)

	// While the manager is down, the output drops a status field.
	stop()
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "w", "--type=merge", "-p", `{"data":{"extra":null}}`)
	stop = startManager(t)
	eventually(t, 30*time.Second, wantStatus(t, ns, res, "w", map[string]string{"size": "3", "phase": "Degraded"}))

	// The output stops setting a status (the ConfigMap has no data: the
	// status is null): it is cleared, while the manager runs and while it
	// is down.
	noData := `[{"op":"remove","path":"/data"}]`
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "w", "--type=json", "-p", noData)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "w", map[string]string{}))
	stableResourceVersion(t, ns, res, "w", 2500*time.Millisecond)
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "w", "--type=merge", "-p", `{"data":{"phase":"Back"}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "w", map[string]string{"phase": "Back"}))
	stop()
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "w", "--type=json", "-p", noData)
	startManager(t)
	eventually(t, 30*time.Second, wantStatus(t, ns, res, "w", map[string]string{}))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "status-updater")
}

// TestStatusPatcherSubresource: a Patcher of a kind with the status
// subresource sends the status part of its patch to /status: the fields
// appear on an object someone else created, the record lists them, a
// field the output drops is removed, one someone else changes is
// restored, and status fields others set stay.
func TestStatusPatcherSubresource(t *testing.T) {
	installCRD(t, "StatusGadget", "statusgadgets", "Namespaced")
	startManager(t)
	ns := "e2e-status-patcher"
	res := "statusgadgets.e2e.dcontroller.io"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, fmt.Sprintf("apiVersion: e2e.dcontroller.io/v1\nkind: StatusGadget\nmetadata: {name: g, namespace: %s}\nspec: {owner: user}\n", ns), "create", "-f", "-")
	mustKubectl(t, "", "-n", ns, "patch", res, "g", "--subresource=status", "--type=merge", "-p", `{"status":{"user":"keep"}}`)
	mustKubectl(t, statusOperator("status-patcher", ns, "StatusGadget", "Patcher"), "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "g", "--from-literal=phase=Running", "--from-literal=ready=yes")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "g", "role=src")
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "g", map[string]string{"user": "keep", "phase": "Running", "ready": "yes"}))
	record := func() string {
		anns := jsonMap(t, mustKubectl(t, "", "-n", ns, "get", res, "g", "-o", "jsonpath={.metadata.annotations}"))
		return anns["patcher.dcontroller.io/status-patcher_status"]
	}
	if got, want := record(), `["/status/phase","/status/ready"]`; got != want {
		t.Fatalf("patch record %s, want %s", got, want)
	}
	stableResourceVersion(t, ns, res, "g", 2500*time.Millisecond)

	mustKubectl(t, "", "-n", ns, "patch", "configmap", "g", "--type=merge", "-p", `{"data":{"ready":null}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "g", map[string]string{"user": "keep", "phase": "Running"}))
	if got, want := record(), `["/status/phase"]`; got != want {
		t.Fatalf("patch record %s, want %s", got, want)
	}

	mustKubectl(t, "", "-n", ns, "patch", res, "g", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Hacked"}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "g", map[string]string{"user": "keep", "phase": "Running"}))
	if got := strings.TrimSpace(mustKubectl(t, "", "-n", ns, "get", res, "g", "-o", "jsonpath={.spec.owner}")); got != "user" {
		t.Fatalf("spec.owner %q, want user", got)
	}
	// The source goes: the Patcher's status fields go, the others stay.
	mustKubectl(t, "", "-n", ns, "delete", "configmap", "g")
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "g", map[string]string{"user": "keep"}))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "status-patcher")
}

// TestStatusApplierSubresource: an Applier of a kind with the status
// subresource applies the status through /status with its field manager:
// the status appears, the manager owns its fields on the status
// subresource, a field the output drops is released (removed), and one
// someone else changes is restored.
func TestStatusApplierSubresource(t *testing.T) {
	installCRD(t, "StatusThing", "statusthings", "Namespaced")
	startManager(t)
	ns := "e2e-status-applier"
	res := "statusthings.e2e.dcontroller.io"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, statusOperator("status-applier", ns, "StatusThing", "Applier"), "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "a", "--from-literal=size=2", "--from-literal=phase=Running", "--from-literal=ready=yes")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "a", "role=src")
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "a", map[string]string{"size": "2", "phase": "Running", "ready": "yes"}))
	managers := mustKubectl(t, "", "-n", ns, "get", res, "a", "--show-managed-fields", "-o",
		`jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource};{end}`)
	if !strings.Contains(managers, "dcontroller-status-applier/Apply/status;") || !strings.Contains(managers, "dcontroller-status-applier/Apply/;") {
		t.Fatalf("managed fields %s: want the operator's field manager on the object and on its status subresource", managers)
	}
	stableResourceVersion(t, ns, res, "a", 2500*time.Millisecond)

	mustKubectl(t, "", "-n", ns, "patch", "configmap", "a", "--type=merge", "-p", `{"data":{"ready":null,"phase":"Degraded"}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "a", map[string]string{"size": "2", "phase": "Degraded"}))

	mustKubectl(t, "", "-n", ns, "patch", res, "a", "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Hacked"}}`)
	eventually(t, 20*time.Second, wantStatus(t, ns, res, "a", map[string]string{"size": "2", "phase": "Degraded"}))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "status-applier")
}
