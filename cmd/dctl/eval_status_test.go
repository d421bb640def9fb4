package main

import (
	"bytes"
	"strings"
	"testing"
)

// An Updater of Deployments whose output sets no status leaves the status an
// input Deployment carries, as the API server does for a kind with the
// status subresource; a custom kind whose CRD (among the inputs) has no
// subresource gets its status replaced with the object.
func TestEvalKeepsStatusOfSubresourceKinds(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: keep}
spec:
  controllers:
    - name: deploy
      sources: [{apiGroup: example.io, kind: App}]
      pipeline:
        "@project":
          metadata: {name: $.metadata.name, namespace: $.metadata.namespace}
          spec: {replicas: $.spec.replicas}
      target: {apiGroup: apps, kind: Deployment}
    - name: plain
      sources: [{apiGroup: example.io, kind: App}]
      pipeline:
        "@project":
          metadata: {name: $.metadata.name, namespace: $.metadata.namespace}
          spec: {count: $.spec.replicas}
      target: {apiGroup: example.io, kind: Plain}
`)
	in := writeFile(t, "in.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: plains.example.io}
spec:
  group: example.io
  names: {kind: Plain, plural: plains}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: example.io/v1
kind: App
metadata: {name: a, namespace: ns}
spec: {replicas: 2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: ns}
spec: {replicas: 1}
status: {readyReplicas: 1}
---
apiVersion: example.io/v1
kind: Plain
metadata: {name: a, namespace: ns}
spec: {count: 1}
status: {phase: Old}
`)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"eval", "-f", op, "-i", in}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
	}
	docs := strings.Split(stdout.String(), "\n---\n")
	var deploy, plain string
	for _, d := range docs {
		switch {
		case strings.Contains(d, "kind: Deployment"):
			deploy = d
		case strings.Contains(d, "kind: Plain"):
			plain = d
		}
	}
	if !strings.Contains(deploy, "replicas: 2") || !strings.Contains(deploy, "readyReplicas: 1") {
		t.Errorf("the Deployment lost its status or was not updated:\n%s", deploy)
	}
	if !strings.Contains(plain, "count: 2") || strings.Contains(plain, "phase: Old") {
		t.Errorf("the Plain object (no status subresource) kept its old status or was not updated:\n%s", plain)
	}
}

// A custom kind whose source or target omits its version takes the storage
// version of its CustomResourceDefinition among the inputs.
func TestEvalVersionFromInputCRD(t *testing.T) {
	op := writeFile(t, "op.yaml", `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: ver}
spec:
  controllers:
    - name: r
      sources: [{apiGroup: "", kind: ConfigMap}]
      pipeline: {"@project": {metadata: {name: $.metadata.name, namespace: $.metadata.namespace}, spec: {from: $.metadata.name}}}
      target: {apiGroup: example.io, kind: Report}
`)
	in := writeFile(t, "in.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: reports.example.io}
spec:
  group: example.io
  names: {kind: Report, plural: reports}
  scope: Namespaced
  versions: [{name: v1beta1, served: true, storage: false}, {name: v2, served: true, storage: true}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: x}
`)
	var stdout, stderr bytes.Buffer
	if code := Execute([]string{"eval", "-f", op, "-i", in}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "apiVersion: example.io/v2\nkind: Report\n") {
		t.Errorf("want the Report in the CRD's storage version v2:\n%s", stdout.String())
	}
}
