package e2e

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// patchMarkOperator annotates each ConfigMap labelled role=src in
// e2e-patcher with its own data (a Patcher), and resyncs every second.
const patchMarkOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: patch-mark
spec:
  controllers:
    - name: mark
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-patcher
          labelSelector: {matchLabels: {role: src}}
        - kind: Tick
          type: Periodic
          parameters: {period: 1s}
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {"@definedOr": ["$.data", {}]}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`

// patchMarkRecord is the annotation in which the Patcher of
// patchMarkOperator records the fields it set.
const patchMarkRecord = "patcher.dcontroller.io/patch-mark_mark"

// TestPatcherDropsFieldsAcrossResyncAndRestart: a field a Patcher set and
// its output no longer sets is removed after Periodic resyncs, after a
// restart of the manager during which the source changed, and, for an
// object that left the source while the manager was down, every field the
// Patcher set goes; annotations others set stay.
func TestPatcherDropsFieldsAcrossResyncAndRestart(t *testing.T) {
	stop := startManager(t)
	ns := "e2e-patcher"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, patchMarkOperator, "apply", "-f", "-")
	for _, name := range []string{"a", "b"} {
		mustKubectl(t, "", "-n", ns, "create", "configmap", name, "--from-literal=tier=gold", "--from-literal=team=x", "--from-literal=note=n")
		mustKubectl(t, "", "-n", ns, "annotate", "configmap", name, "user=keep")
		mustKubectl(t, "", "-n", ns, "label", "configmap", name, "role=src")
	}
	annotations := func(name string) map[string]string {
		out, err := kubectl(t, "", "-n", ns, "get", "configmap", name, "-o", `jsonpath={.metadata.annotations}`)
		if err != nil {
			return nil
		}
		return jsonMap(t, out)
	}
	want := func(name string, anns map[string]string) func() string {
		return func() string {
			if got := annotations(name); !reflect.DeepEqual(got, anns) {
				return fmt.Sprintf("configmap %s annotations %v, want %v", name, got, anns)
			}
			return ""
		}
	}
	all := `["/metadata/annotations/note","/metadata/annotations/team","/metadata/annotations/tier"]`
	for _, name := range []string{"a", "b"} {
		eventually(t, 20*time.Second, want(name, map[string]string{"user": "keep", "tier": "gold", "team": "x", "note": "n", patchMarkRecord: all}))
	}
	// Periodic resyncs pass; then the output drops tier.
	time.Sleep(2500 * time.Millisecond)
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "a", "--type=merge", "-p", `{"data":{"tier":null}}`)
	eventually(t, 20*time.Second, want("a", map[string]string{"user": "keep", "team": "x", "note": "n",
		patchMarkRecord: `["/metadata/annotations/note","/metadata/annotations/team"]`}))

	// While the manager is down, a drops team and b leaves the source.
	stop()
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "a", "--type=merge", "-p", `{"data":{"team":null}}`)
	mustKubectl(t, "", "-n", ns, "label", "configmap", "b", "role-")
	startManager(t)
	eventually(t, 30*time.Second, want("a", map[string]string{"user": "keep", "note": "n", patchMarkRecord: `["/metadata/annotations/note"]`}))
	eventually(t, 30*time.Second, want("b", map[string]string{"user": "keep"}))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "patch-mark")
}
