package e2e

import (
	"fmt"
	"testing"
	"time"
)

const listerOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: lister-source
spec:
  controllers:
    - name: copy
      sources:
        - apiGroup: ""
          kind: ConfigMap
          type: Lister
          namespace: e2e-lister
          labelSelector: {matchLabels: {role: src}}
      pipeline:
        - "@project":
            metadata:
              name: {"@concat": ["$.metadata.name", "-copy"]}
              namespace: "$.metadata.namespace"
            data: {a: "$.data.a"}
      targets: [{apiGroup: "", kind: ConfigMap}]
`

// TestListerSource: the CRD accepts the successor's type: Lister, and the
// source runs as a Watcher: the Operator is Ready, and its target follows
// the source's creation, update and departure from the selection.
func TestListerSource(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-lister")
	mustKubectl(t, listerOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-lister", "create", "configmap", "src", "--from-literal=a=1")
	mustKubectl(t, "", "-n", "e2e-lister", "label", "configmap", "src", "role=src")
	copyOf := func() string {
		out, err := kubectl(t, "", "-n", "e2e-lister", "get", "configmap", "src-copy", "-o", `jsonpath={.data.a}`)
		if err != nil {
			return "<missing>"
		}
		return out
	}
	ready := func() string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", "lister-source", "-o",
			`jsonpath={.status.controllers[0].conditions[0].reason}`)
		return out
	}
	eventually(t, 20*time.Second, func() string {
		if got, r := copyOf(), ready(); got != "1" || r != "Ready" {
			return fmt.Sprintf("copy %q, controller %q", got, r)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-lister", "patch", "configmap", "src", "--type=merge", "-p", `{"data":{"a":"2"}}`)
	eventually(t, 20*time.Second, func() string {
		if got := copyOf(); got != "2" {
			return fmt.Sprintf("copy after the update: %q", got)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-lister", "label", "configmap", "src", "role-")
	eventually(t, 20*time.Second, func() string {
		if got := copyOf(); got != "<missing>" {
			return fmt.Sprintf("copy after its source left: %q", got)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "lister-source")
}
