package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// echoStatusOperator copies the data of each ConfigMap labelled role=src
// in e2e-echo into the status of the Echo of the same name (a Patcher of
// the status subresource).
const echoStatusOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: echo-status
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-echo, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          status: {v: "$.data.v"}
      target: {apiGroup: e2e.dcontroller.io, kind: Echo, type: Patcher}
`

// TestPatcherStatusFastOutputNotContested: a Patcher of status whose
// output changes several times within a second (its source is patched in
// quick bursts) sees the watch events of its own earlier writes arrive
// after it wrote newer ones; those echoes are no change by another writer:
// the controller stays Ready, raises no TargetContested Event and ends
// with the last output written.
func TestPatcherStatusFastOutputNotContested(t *testing.T) {
	startManager(t)
	const ns = "e2e-echo"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: echoes.e2e.dcontroller.io}
spec:
  group: e2e.dcontroller.io
  scope: Namespaced
  names: {kind: Echo, plural: echoes, singular: echo, listKind: EchoList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`, "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/echoes.e2e.dcontroller.io")
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Echo
metadata: {name: src, namespace: e2e-echo}
spec: {}
`, "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "src", "--from-literal=v=0")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "src", "role=src")
	mustKubectl(t, echoStatusOperator, "apply", "-f", "-")
	statusV := func() string {
		out, err := kubectl(t, "", "-n", ns, "get", "echoes.e2e.dcontroller.io", "src", "-o", "jsonpath={.status.v}")
		if err != nil {
			return "error: " + err.Error()
		}
		return out
	}
	eventually(t, 30*time.Second, func() string {
		if v := statusV(); v != "0" {
			return fmt.Sprintf("status.v %q, want 0", v)
		}
		return ""
	})

	// Bursts of 5 changes each, as fast as the API server takes them,
	// twice a second for 8 seconds: long enough for the restores of a
	// controller that took the echoes for another writer's changes to get
	// past their backoff (1 s, 2 s) and make the object contested.
	ctx := context.Background()
	last := ""
	for burst := 0; burst < 16; burst++ {
		for i := 0; i < 5; i++ {
			last = fmt.Sprintf("%d-%d", burst, i)
			cm := &corev1.ConfigMap{}
			cm.Namespace, cm.Name = ns, "src"
			patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"data":{"v":%q}}`, last)))
			if err := k8sClient.Patch(ctx, cm, patch); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	eventually(t, 30*time.Second, func() string {
		if v := statusV(); v != last {
			return fmt.Sprintf("status.v %q, want %q", v, last)
		}
		return ""
	})
	// Echoes come within a second or two; give them time to be (wrongly)
	// counted.
	time.Sleep(3 * time.Second)
	if out, err := controllerReady(t, "echo-status"); err != nil || !strings.HasPrefix(out, "True ") {
		t.Errorf("echo-status Ready %q (err %v), want True", out, err)
	}
	if out, err := operatorEvents(t, "echo-status"); err != nil || strings.Contains(out, "TargetContested") {
		t.Errorf("echo-status events:\n%s(err %v)", out, err)
	}
	if out := mustKubectl(t, "", "get", "operators.dcontroller.io", "echo-status", "-o", "jsonpath={.status.controllers[0].counters.writeErrors}|{.status.controllers[0].lastErrors}"); out != "|" {
		t.Errorf("echo-status write errors and last errors: %q", out)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "echo-status")
}

// annotateOperator annotates each ConfigMap labelled role=src in
// e2e-cmdel (a Patcher whose targets are its sources).
const annotateOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: annotate-cm
spec:
  controllers:
    - name: mark
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-cmdel, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {e2e.dcontroller.io/marked: "yes"}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`

// TestPatcherTargetsDeleted: deleting the objects a Patcher annotated
// (its sources too) is no error: nothing is left to remove, and a Patcher
// restores no deleted object; the controller records no write error.
func TestPatcherTargetsDeleted(t *testing.T) {
	startManager(t)
	const ns = "e2e-cmdel"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, annotateOperator, "apply", "-f", "-")
	var docs []string
	names := []string{"c1", "c2", "c3", "c4"}
	for _, n := range names {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, labels: {role: src}}\ndata: {v: \"1\"}\n", n, ns))
	}
	mustKubectl(t, strings.Join(docs, "---\n"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "-n", ns, "get", "configmaps", "-l", "role=src", "-o", `jsonpath={range .items[*]}{.metadata.annotations.e2e\.dcontroller\.io/marked}{" "}{end}`)
		if err != nil || out != "yes yes yes yes " {
			return fmt.Sprintf("marks %q (err %v)", out, err)
		}
		return ""
	})
	for round := 0; round < 3; round++ {
		if round > 0 {
			mustKubectl(t, strings.Join(docs, "---\n"), "apply", "-f", "-")
			time.Sleep(time.Second)
		}
		mustKubectl(t, "", append([]string{"-n", ns, "delete", "configmap"}, names...)...)
		time.Sleep(3 * time.Second)
	}
	out := mustKubectl(t, "", "get", "operators.dcontroller.io", "annotate-cm", "-o", "jsonpath={.status.controllers[0].counters.writeErrors}|{.status.controllers[0].lastErrors}")
	if out != "|" {
		t.Errorf("after deleting the annotated ConfigMaps: write errors and last errors %q, want none", out)
	}
	if out, err := controllerReady(t, "annotate-cm"); err != nil || !strings.HasPrefix(out, "True ") {
		t.Errorf("annotate-cm Ready %q (err %v), want True", out, err)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "annotate-cm")
}
