package main

import (
	"bytes"
	"strings"
	"testing"
)

// branchOperator has a pipeline in branch form: the running Pods are a
// stream that a second branch joins with the Services selecting them.
const branchOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: branches}
spec:
  controllers:
    - name: running-pods
      sources:
        - {apiGroup: "", kind: Pod}
        - {apiGroup: "", kind: Service}
      pipeline:
        - - "@inputs": [Pod]
          - "@select": {"@eq": ["$.status.phase", "Running"]}
          - "@output": running
        - - "@inputs": [running, Service]
          - "@join": {"@and": [{"@eq": ["$.running.metadata.namespace", "$.Service.metadata.namespace"]},
                               {"@eq": ["$.running.metadata.labels.app", "$.Service.spec.selector.app"]}]}
          - "@groupBy": ["$.Service.metadata.name", "$.running.metadata.name"]
          - "@project": {metadata: {name: "$.key", namespace: default}, pods: "$.values"}
          - "@output": %s
      target: {kind: ServicePods}
`

const branchInput = `apiVersion: v1
kind: Pod
metadata: {name: a, namespace: default, labels: {app: web}}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: default, labels: {app: web}}
status: {phase: Pending}
---
apiVersion: v1
kind: Pod
metadata: {name: c, namespace: default, labels: {app: web}}
status: {phase: Running}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}}
`

// TestEvalBranches: a controller's pipeline in branch form writes its
// target from the branch whose @output names it; an @output naming no
// target is refused with its path.
func TestEvalBranches(t *testing.T) {
	op := writeFile(t, "op.yaml", strings.Replace(branchOperator, "%s", "ServicePods", 1))
	in := writeFile(t, "in.yaml", branchInput)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"eval", "-f", op, "-i", in}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := `apiVersion: branches.view.dcontroller.io/v1alpha1
kind: ServicePods
metadata:
  name: web
  namespace: default
pods:
- a
- c
`
	if stdout.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", stdout.String(), want)
	}

	bad := writeFile(t, "bad.yaml", strings.Replace(branchOperator, "%s", "ServicePod", 1))
	stdout.Reset()
	stderr.Reset()
	code := Execute([]string{"eval", "-f", bad, "-i", in}, nil, &stdout, &stderr)
	wantErr := `spec.controllers[0].pipeline[1][4]["@output"]: "ServicePod" is neither a target (targets: ServicePods) nor read by the @inputs of any branch`
	if code != 1 || !strings.Contains(stderr.String(), wantErr) {
		t.Fatalf("exit %d, stderr %s; want 1 and %s", code, stderr.String(), wantErr)
	}
}
