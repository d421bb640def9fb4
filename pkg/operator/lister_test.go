package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// listerOperator is a controller in the successor's form whose Pod source
// has the given type: the ready Pods of each Service, joined on the app
// label and grouped per Service.
const listerOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata: {name: ready}
spec:
  controllers:
    - name: ready-pods
      sources:
        - apiGroup: ""
          kind: Pod
          type: %s
          namespace: shop
          labelSelector: {matchLabels: {monitored: "yes"}}
        - apiGroup: ""
          kind: Service
          type: %s
      pipeline:
        - "@join": {"@eq": ["$.Pod.metadata.labels.app", "$.Service.spec.selector.app"]}
        - "@select": {"@eq": ["$.Pod.status.phase", "Running"]}
        - "@groupBy": ["$.Service.metadata", "$.Pod.metadata.name"]
        - "@project":
            metadata: {name: "$.key.name", namespace: "$.key.namespace"}
            pods: "$.values"
      targets:
        - kind: ReadyPods
`

// listerSteps are applied one at a time: creations, an update that leaves
// the selection, one that enters it, a phase change and a deletion.
var listerSteps = []string{
	`{apiVersion: v1, kind: Service, metadata: {name: web, namespace: shop}, spec: {selector: {app: web}}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: shop, labels: {app: web, monitored: "yes"}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-2, namespace: shop, labels: {app: web, monitored: "yes"}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-3, namespace: other, labels: {app: web, monitored: "yes"}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-1, namespace: shop, labels: {app: web}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-4, namespace: shop, labels: {app: web}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-4, namespace: shop, labels: {app: web, monitored: "yes"}}, status: {phase: Running}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-2, namespace: shop, labels: {app: web, monitored: "yes"}}, status: {phase: Failed}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-4, namespace: shop, deletionTimestamp: "2026-01-01T00:00:00Z"}}`,
	`{apiVersion: v1, kind: Pod, metadata: {name: web-2, namespace: shop, labels: {app: web, monitored: "yes"}}, status: {phase: Running}}`,
}

// listerRun applies listerSteps to the operator with sources of type typ
// and returns the result (as YAML) after each step.
func listerRun(t *testing.T, typ string) []string {
	t.Helper()
	off := mustOffline(t, fmt.Sprintf(listerOperator, typ, typ), OfflineOptions{})
	if err := off.Start(context.Background()); err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	var out []string
	for i, step := range listerSteps {
		for _, obj := range input(t, step) {
			if err := off.Apply(context.Background(), obj); err != nil {
				t.Fatalf("%s: step %d: %v", typ, i, err)
			}
		}
		var b strings.Builder
		for _, obj := range off.Result() {
			y, err := yaml.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(y)
			b.WriteString("---\n")
		}
		out = append(out, b.String())
	}
	return out
}

// A Lister source (the successor's state-of-the-world source) runs as a
// Watcher: after every change the targets are the ones a Watcher gives,
// the pipeline on the current objects.
func TestOfflineListerSourceAsWatcher(t *testing.T) {
	watcher := listerRun(t, "Watcher")
	lister := listerRun(t, "Lister")
	for i := range watcher {
		if lister[i] != watcher[i] {
			t.Errorf("step %d: Lister result differs from Watcher's\n--- Lister\n%s--- Watcher\n%s", i, lister[i], watcher[i])
		}
	}
	// The run is not trivially equal: the Pods come and go as stated.
	for i, want := range map[int][]string{
		2: {"- web-1\n", "- web-2\n"},
		4: {"- web-2\n"},
		6: {"- web-2\n", "- web-4\n"},
		7: {"- web-4\n"},
		9: {"- web-2\n"},
	} {
		for _, w := range want {
			if !strings.Contains(lister[i], w) {
				t.Errorf("step %d: result lacks %q:\n%s", i, w, lister[i])
			}
		}
	}
	if lister[8] != "" {
		t.Errorf("step 8: no Pod is ready, yet the result is\n%s", lister[8])
	}
	if strings.Contains(lister[len(lister)-1], "web-1") || strings.Contains(lister[len(lister)-1], "web-3") {
		t.Errorf("final result holds a Pod outside the selection:\n%s", lister[len(lister)-1])
	}
}
