package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

const targetsListOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: targets-list
spec:
  controllers:
    - name: one
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-targets
          labelSelector: {matchLabels: {role: src}}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-copy"]}
            namespace: "$.metadata.namespace"
          data: {from: "$.metadata.name"}
      targets: [{name: copy, apiGroup: "", kind: ConfigMap}]
      options: {disableDistincter: true}
    - name: both
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-targets}]
      pipeline: {"@select": true}
      target: {kind: KeyCount}
      targets: [{kind: KeyCount}]
    - name: twice
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-targets}]
      pipeline: {"@select": true}
      targets: [{kind: KeyCount}, {kind: KeyCount, type: Patcher}]
`

// TestTargetsList: a controller written with targets: (here one named
// target) writes, restores and deletes its objects as with target:, under
// its own owner annotation; the successor's options: are kept by the CRD;
// target: and targets: together, and two targets of one name, are
// InvalidSpec with the path in the Operator's status while the other
// controllers run.
func TestTargetsList(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-targets")
	mustKubectl(t, targetsListOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-targets", "create", "configmap", "src", "--from-literal=a=1")
	mustKubectl(t, "", "-n", "e2e-targets", "label", "configmap", "src", "role=src")
	copyOf := func() string {
		out, err := kubectl(t, "", "-n", "e2e-targets", "get", "configmap", "src-copy", "-o",
			`jsonpath={.data.from} {.metadata.annotations.dcontroller\.io/owner}`)
		if err != nil {
			return "<missing>"
		}
		return out
	}
	eventually(t, 20*time.Second, func() string {
		if got := copyOf(); got != "src targets-list/one/copy" {
			return fmt.Sprintf("copy: %q", got)
		}
		return ""
	})
	status := func() string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", "targets-list", "-o",
			`jsonpath={range .status.controllers[*]}{.name} {.conditions[0].status} {.conditions[0].reason} {.conditions[0].message}{"\n"}{end}`)
		return out
	}
	both := regexp.MustCompile(`both False InvalidSpec spec\.controllers\[1\]: both target and targets are set; write one target as target: \{\.\.\.\} or several as targets: \[\{\.\.\.\}, \.\.\.\], not both`)
	twice := regexp.MustCompile(`twice False InvalidSpec spec\.controllers\[2\]\.targets\[1\]\.name: target name "KeyCount" is also the name of targets\[0\]`)
	eventually(t, 20*time.Second, func() string {
		out := status()
		if !strings.Contains(out, "one True Ready") || !both.MatchString(out) || !twice.MatchString(out) {
			return "status:\n" + out
		}
		return ""
	})
	if out := mustKubectl(t, "", "get", "operators.dcontroller.io", "targets-list", "-o", `jsonpath={.spec.controllers[0].options}`); out != `{"disableDistincter":true}` {
		t.Errorf("options as stored: %q", out)
	}
	// Deleted by someone else: restored under the target's owner.
	mustKubectl(t, "", "-n", "e2e-targets", "delete", "configmap", "src-copy")
	eventually(t, 20*time.Second, func() string {
		if got := copyOf(); got != "src targets-list/one/copy" {
			return fmt.Sprintf("copy after its deletion: %q", got)
		}
		return ""
	})
	// The output goes: the object goes.
	mustKubectl(t, "", "-n", "e2e-targets", "label", "configmap", "src", "role-")
	eventually(t, 20*time.Second, func() string {
		if got := copyOf(); got != "<missing>" {
			return fmt.Sprintf("copy after its source left: %q", got)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "targets-list")
}

const twoKindsOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: two-kinds
spec:
  controllers:
    - name: fan
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-two-kinds
          labelSelector: {matchLabels: {role: src}}
      targets:
        - {apiGroup: "", kind: ConfigMap}
        - {apiGroup: "", kind: ServiceAccount}
      pipeline:
        - - "@inputs": [ConfigMap]
          - "@project":
              metadata:
                name: {"@concat": ["$.metadata.name", "-copy"]}
                namespace: "$.metadata.namespace"
              data: {from: "$.metadata.name"}
          - "@output": ConfigMap
        - - "@inputs": [ConfigMap]
          - "@project":
              metadata:
                name: {"@concat": ["$.metadata.name", "-sa"]}
                namespace: "$.metadata.namespace"
                labels: {from: "$.metadata.name"}
          - "@output": ServiceAccount
`

// TestTargetsOfTwoKinds: one pipeline in branch form writes a ConfigMap
// and a ServiceAccount per source object; each target restores its own
// object and deletes it when its output goes.
func TestTargetsOfTwoKinds(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-two-kinds")
	mustKubectl(t, twoKindsOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-two-kinds", "create", "configmap", "src", "--from-literal=a=1")
	mustKubectl(t, "", "-n", "e2e-two-kinds", "label", "configmap", "src", "role=src")
	get := func(kind, name, path string) string {
		out, err := kubectl(t, "", "-n", "e2e-two-kinds", "get", kind, name, "-o", "jsonpath="+path+` {.metadata.annotations.dcontroller\.io/owner}`)
		if err != nil {
			return "<missing>"
		}
		return out
	}
	both := func(want1, want2 string) func() string {
		return func() string {
			cm, sa := get("configmap", "src-copy", "{.data.from}"), get("serviceaccount", "src-sa", "{.metadata.labels.from}")
			if cm != want1 || sa != want2 {
				return fmt.Sprintf("configmap %q, serviceaccount %q", cm, sa)
			}
			return ""
		}
	}
	eventually(t, 20*time.Second, both("src two-kinds/fan", "src two-kinds/fan"))
	eventually(t, 20*time.Second, func() string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", "two-kinds", "-o",
			`jsonpath={.status.controllers[0].conditions[0].reason} {.status.controllers[0].counters.writes}`)
		if out != "Ready 2" {
			return "status: " + out
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-two-kinds", "delete", "serviceaccount", "src-sa")
	eventually(t, 20*time.Second, both("src two-kinds/fan", "src two-kinds/fan"))
	mustKubectl(t, "", "-n", "e2e-two-kinds", "label", "configmap", "src", "role-")
	eventually(t, 20*time.Second, both("<missing>", "<missing>"))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "two-kinds")
}
