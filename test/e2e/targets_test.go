package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jsonMap reads a map printed by kubectl's jsonpath ("" is empty).
func jsonMap(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("reading %q: %v", s, err)
	}
	return out
}

const labelCopyOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: label-copy
spec:
  controllers:
    - name: copy
      sources:
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-labels
          labelSelector: {matchLabels: {role: src}}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-copy"]}
            namespace: "$.metadata.namespace"
            labels: {"@definedOr": ["$.data", {}]}
            annotations: {"@definedOr": ["$.metadata.annotations", {}]}
          data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap}
`

// TestUpdaterDropsLabels: labels and annotations that the output of an
// Updater no longer sets are removed from the target, also when they were
// dropped while the manager was down; labels and annotations others set on
// the target stay. The result equals what dctl eval computes from the final
// source, plus what others set.
func TestUpdaterDropsLabels(t *testing.T) {
	stop := startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-labels")
	mustKubectl(t, labelCopyOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-labels", "create", "configmap", "src", "--from-literal=tier=gold", "--from-literal=team=a")
	mustKubectl(t, "", "-n", "e2e-labels", "annotate", "configmap", "src", "note=x")
	mustKubectl(t, "", "-n", "e2e-labels", "label", "configmap", "src", "role=src")
	meta := func() (labels, annotations map[string]string) {
		out, err := kubectl(t, "", "-n", "e2e-labels", "get", "configmap", "src-copy", "-o", `jsonpath={.metadata.labels}{"\n"}{.metadata.annotations}`)
		if err != nil {
			return nil, nil
		}
		l, a, _ := strings.Cut(out, "\n")
		return jsonMap(t, l), jsonMap(t, a)
	}
	eventually(t, 20*time.Second, func() string {
		l, a := meta()
		if l["tier"] != "gold" || l["team"] != "a" || a["note"] != "x" {
			return fmt.Sprintf("target labels %v annotations %v", l, a)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-labels", "label", "configmap", "src-copy", "extra=kept")
	mustKubectl(t, "", "-n", "e2e-labels", "annotate", "configmap", "src-copy", "other=kept")
	// The output drops tier.
	mustKubectl(t, "", "-n", "e2e-labels", "patch", "configmap", "src", "--type=merge", "-p", `{"data":{"tier":null}}`)
	eventually(t, 20*time.Second, func() string {
		l, a := meta()
		if !reflect.DeepEqual(l, map[string]string{"team": "a", "extra": "kept"}) {
			return fmt.Sprintf("labels after the output dropped tier: %v", l)
		}
		// The keys the output sets are recorded on the object.
		var rec struct {
			Labels      []string `json:"labels"`
			Annotations []string `json:"annotations"`
			Output      string   `json:"output"`
		}
		got := a["dcontroller.io/managed-metadata"]
		if err := json.Unmarshal([]byte(got), &rec); err != nil || !reflect.DeepEqual(rec.Labels, []string{"team"}) ||
			!reflect.DeepEqual(rec.Annotations, []string{"note"}) || rec.Output == "" {
			return fmt.Sprintf("managed-metadata annotation %q", got)
		}
		return ""
	})
	// The output drops the rest while the manager is down.
	stop()
	mustKubectl(t, "", "-n", "e2e-labels", "patch", "configmap", "src", "--type=merge", "-p", `{"data":null}`)
	mustKubectl(t, "", "-n", "e2e-labels", "annotate", "configmap", "src", "note-")
	startManager(t)
	eventually(t, 30*time.Second, func() string {
		l, a := meta()
		if !reflect.DeepEqual(l, map[string]string{"extra": "kept"}) {
			return fmt.Sprintf("labels after a restart: %v", l)
		}
		// The record keeps only the output digest: the output sets no
		// labels or annotations any more.
		rec := a["dcontroller.io/managed-metadata"]
		delete(a, "dcontroller.io/managed-metadata")
		if !reflect.DeepEqual(a, map[string]string{"other": "kept", "dcontroller.io/owner": "label-copy/copy"}) ||
			!strings.HasPrefix(rec, `{"output":"`) {
			return fmt.Sprintf("annotations after a restart: %v, managed-metadata %q", a, rec)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "label-copy")
}

func ownerOperator(name, by string) string {
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  controllers:
    - name: write
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-owner, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata: {name: shared, namespace: "$.metadata.namespace"}
          data: {by: %s}
      target: {apiGroup: "", kind: ConfigMap}
`, name, by)
}

// controllerReady returns "<status> <reason> <message>" of a controller's
// Ready condition.
func controllerReady(t *testing.T, op string) (string, error) {
	return kubectl(t, "", "get", "operators.dcontroller.io", op, "-o",
		`jsonpath={.status.controllers[0].conditions[?(@.type=="Ready")].status} {.status.controllers[0].conditions[?(@.type=="Ready")].reason} {.status.controllers[0].conditions[?(@.type=="Ready")].message}`)
}

// operatorEvents returns "<type> <reason> <note>" lines of an Operator's Events.
func operatorEvents(t *testing.T, op string) (string, error) {
	return kubectl(t, "", "get", "events", "-A", "--field-selector", "involvedObject.name="+op,
		"-o", `jsonpath={range .items[*]}{.type} {.reason} {.note}{.message}{"\n"}{end}`)
}

// TestUpdaterOwnerConflict: two operators whose Updaters write the same
// object do not take it from each other: the second leaves it to the first,
// says so in its status and in a Warning Event (and counts as running, not
// as an invalid controller), and writes nothing while the first runs; when the first is deleted, the second adopts the object.
func TestUpdaterOwnerConflict(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-owner")
	mustKubectl(t, "", "-n", "e2e-owner", "create", "configmap", "src")
	mustKubectl(t, "", "-n", "e2e-owner", "label", "configmap", "src", "role=src")
	shared := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-owner", "get", "configmap", "shared", "-o", `jsonpath={.data.by} {.metadata.annotations.dcontroller\.io/owner} {.metadata.resourceVersion}`)
	}
	mustKubectl(t, ownerOperator("owner-a", "a"), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if out, err := shared(); err != nil || !strings.HasPrefix(out, "a owner-a/write ") {
			return fmt.Sprintf("shared %q (err %v)", out, err)
		}
		return ""
	})
	mustKubectl(t, ownerOperator("owner-b", "b"), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		out, err := controllerReady(t, "owner-b")
		if err != nil || out != "False OwnerConflict ConfigMap e2e-owner/shared is owned by owner-a/write (annotation dcontroller.io/owner); not taking it over while that controller runs" {
			return fmt.Sprintf("owner-b Ready %q (err %v)", out, err)
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		out, err := operatorEvents(t, "owner-b")
		if err != nil || !strings.Contains(out, "Warning OwnerConflict controller write: ConfigMap e2e-owner/shared is owned by owner-a/write") ||
			!strings.Contains(out, "Normal Started operator started with") {
			return fmt.Sprintf("owner-b events:\n%s(err %v)", out, err)
		}
		return ""
	})
	// An owner conflict is a condition of a running controller, not an
	// invalid one.
	if out, err := operatorEvents(t, "owner-b"); err != nil || strings.Contains(out, "InvalidController") ||
		!strings.Contains(out, "Normal Started operator started with 1 of 1 controllers running") {
		t.Errorf("owner-b events: want Started with 1 of 1 controllers running and no InvalidController:\n%s(err %v)", out, err)
	}
	// Stable: the object keeps its owner and is not rewritten.
	before, _ := shared()
	time.Sleep(3 * time.Second)
	if after, err := shared(); err != nil || after != before || !strings.HasPrefix(after, "a owner-a/write ") {
		t.Errorf("shared changed while both run: %q -> %q (err %v)", before, after, err)
	}
	if out, err := controllerReady(t, "owner-a"); err != nil || !strings.HasPrefix(out, "True Ready") {
		t.Errorf("owner-a Ready %q (err %v)", out, err)
	}
	// The first operator goes away (its object stays; nothing collects it):
	// the second adopts the object.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "owner-a")
	eventually(t, 30*time.Second, func() string {
		if out, err := shared(); err != nil || !strings.HasPrefix(out, "b owner-b/write ") {
			return fmt.Sprintf("shared after owner-a was deleted %q (err %v)", out, err)
		}
		if out, err := controllerReady(t, "owner-b"); err != nil || !strings.HasPrefix(out, "True Ready") {
			return fmt.Sprintf("owner-b Ready %q (err %v)", out, err)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "owner-b")
}

const restoreOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: restorer
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-restore, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-copy"]}
            namespace: "$.metadata.namespace"
          data: {v: "$.data.v"}
      target: {apiGroup: "", kind: ConfigMap}
    - name: mark
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-restore, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {"e2e.dcontroller.io/v": "$.data.v"}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`

// TestTargetRestored: without any Periodic source, an Updater target that is
// deleted or edited by hand is restored within seconds, and so is a field a
// Patcher set; what others add besides stays. An object that another writer
// keeps changing is restored with growing delays (not in a hot loop), and
// the fight is reported in the status and in a Warning Event.
func TestTargetRestored(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-restore")
	mustKubectl(t, restoreOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-restore", "create", "configmap", "src", "--from-literal=v=1")
	mustKubectl(t, "", "-n", "e2e-restore", "label", "configmap", "src", "role=src")
	copyV := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-restore", "get", "configmap", "src-copy", "-o", "jsonpath={.data.v}")
	}
	mark := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-restore", "get", "configmap", "src", "-o", `jsonpath={.metadata.annotations.e2e\.dcontroller\.io/v}`)
	}
	want := func(what string, get func() (string, error), v string) func() string {
		return func() string {
			if got, err := get(); err != nil || got != v {
				return fmt.Sprintf("%s %q (err %v)", what, got, err)
			}
			return ""
		}
	}
	eventually(t, 20*time.Second, want("copy", copyV, "1"))
	eventually(t, 20*time.Second, want("mark", mark, "1"))

	mustKubectl(t, "", "-n", "e2e-restore", "delete", "configmap", "src-copy")
	eventually(t, 10*time.Second, want("deleted copy", copyV, "1"))
	mustKubectl(t, "", "-n", "e2e-restore", "patch", "configmap", "src-copy", "--type=merge", "-p", `{"data":{"v":"edited"}}`)
	eventually(t, 10*time.Second, want("edited copy", copyV, "1"))
	mustKubectl(t, "", "-n", "e2e-restore", "annotate", "configmap", "src", "e2e.dcontroller.io/v-")
	eventually(t, 10*time.Second, want("removed mark", mark, "1"))
	// A label someone adds is not the Updater's business: kept, no write.
	mustKubectl(t, "", "-n", "e2e-restore", "label", "configmap", "src-copy", "user=x")
	rv := mustKubectl(t, "", "-n", "e2e-restore", "get", "configmap", "src-copy", "-o", "jsonpath={.metadata.resourceVersion}")
	time.Sleep(2 * time.Second)
	if out := mustKubectl(t, "", "-n", "e2e-restore", "get", "configmap", "src-copy", "-o", "jsonpath={.metadata.resourceVersion} {.metadata.labels.user}"); out != rv+" x" {
		t.Errorf("after a foreign label: %q, want %q", out, rv+" x")
	}

	// Another writer keeps changing the copy for 12 seconds. Before each of
	// its changes it reads the copy: finding "1" there means the
	// controller restored it since the last change (its backoff of 1 s and
	// more is far above the writer's 50 ms, so no two restores fall between
	// two reads; one that lands between a read and the change goes unseen,
	// which makes the count a lower bound).
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	var fights, restores int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cm := &corev1.ConfigMap{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: "e2e-restore", Name: "src-copy"}, cm); err == nil && fights > 0 && cm.Data["v"] == "1" {
				restores++
			}
			patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"data":{"v":"fight-%d"}}`, fights)))
			if err := k8sClient.Patch(ctx, cm, patch); err == nil {
				fights++
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	eventually(t, 20*time.Second, func() string {
		out, err := controllerReady(t, "restorer")
		if err != nil || !strings.Contains(out, "False TargetContested ConfigMap e2e-restore/src-copy keeps being changed by another writer") {
			return fmt.Sprintf("restorer Ready %q (err %v)", out, err)
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		out, err := operatorEvents(t, "restorer")
		if err != nil || !strings.Contains(out, "Warning TargetContested controller copy: ConfigMap e2e-restore/src-copy keeps being changed by another writer") {
			return fmt.Sprintf("restorer events:\n%s(err %v)", out, err)
		}
		return ""
	})
	wg.Wait()
	t.Logf("%d changes by the other writer, %d restores seen", fights, restores)
	// Immediate, then after 1, 2, 4 and 8 seconds: at most 5 in 12 seconds
	// (6 with scheduling slack), instead of one per change.
	if fights < 40 || restores < 1 || restores > 6 {
		t.Errorf("%d changes by the other writer, %d restores seen", fights, restores)
	}
	// When the other writer stops, the copy is restored after its backoff.
	eventually(t, 40*time.Second, want("copy after the fight", copyV, "1"))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "restorer")
}

const recreateOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: recreate-mark
spec:
  controllers:
    - name: mark
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-recreate, labelSelector: {matchLabels: {role: src}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-tgt"]}
            namespace: "$.metadata.namespace"
            annotations: {"e2e.dcontroller.io/v": "$.data.v"}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher}
`

// TestPatcherTargetRecreated: a Patcher's target object, another object
// than its source, that someone deletes and creates again is patched again
// within seconds, each time, with no change of the source.
func TestPatcherTargetRecreated(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-recreate")
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", "recreate-mark", "--ignore-not-found")
		_, _ = kubectl(t, "", "delete", "namespace", "e2e-recreate", "--wait=false")
	})
	mustKubectl(t, recreateOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-recreate", "create", "configmap", "src", "--from-literal=v=1")
	mustKubectl(t, "", "-n", "e2e-recreate", "label", "configmap", "src", "role=src")
	mustKubectl(t, "", "-n", "e2e-recreate", "create", "configmap", "src-tgt", "--from-literal=k=v")
	mark := func() string {
		got, err := kubectl(t, "", "-n", "e2e-recreate", "get", "configmap", "src-tgt", "-o", `jsonpath={.metadata.annotations.e2e\.dcontroller\.io/v}`)
		if err != nil || got != "1" {
			return fmt.Sprintf("mark %q (err %v)", got, err)
		}
		return ""
	}
	eventually(t, 20*time.Second, mark)
	for i := range 3 {
		mustKubectl(t, "", "-n", "e2e-recreate", "delete", "configmap", "src-tgt")
		mustKubectl(t, "", "-n", "e2e-recreate", "create", "configmap", "src-tgt", "--from-literal=k=v")
		start := time.Now()
		eventually(t, 15*time.Second, mark)
		t.Logf("re-creation %d: patched again after %v", i+1, time.Since(start).Round(10*time.Millisecond))
	}
}

// TestOneWritePerObjectAtStart: a controller's start writes each target
// object once, also when objects are created while it starts: the resync
// after its first batch leaves alone what that batch just wrote, instead
// of taking the informer cache, which does not hold the writes' echoes
// yet, for a change by someone else. Three starts, each with two pods
// before the Operator and three created while it starts; the PATCHes are
// counted on the API server.
func TestOneWritePerObjectAtStart(t *testing.T) {
	startManager(t)
	for round := range 3 {
		ns := fmt.Sprintf("e2e-onewrite-%d", round)
		name := fmt.Sprintf("onewrite-%d", round)
		mustKubectl(t, "", "create", "namespace", ns)
		t.Cleanup(func() {
			_, _ = kubectl(t, "", "delete", "operators.dcontroller.io", name, "--ignore-not-found")
			_, _ = kubectl(t, "", "delete", "namespace", ns, "--wait=false")
		})
		op := fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: %s
spec:
  controllers:
    - name: mark
      sources: [{apiGroup: "", kind: Pod, namespace: %s}]
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
            annotations: {"e2e.dcontroller.io/n": {"@string": {"@len": ["$.spec.containers"]}}}
      target: {apiGroup: "", kind: Pod, type: Patcher}
`, name, ns)
		for i := range 2 {
			mustKubectl(t, "", "-n", ns, "run", fmt.Sprintf("before-%d", i), "--image=x")
		}
		before := serverRequests(t, "pods")["PATCH pods"]
		created := make(chan error, 1)
		go func() {
			var err error
			for i := range 3 {
				if _, e := kubectl(t, "", "-n", ns, "run", fmt.Sprintf("during-%d", i), "--image=x"); e != nil {
					err = e
				}
			}
			created <- err
		}()
		mustKubectl(t, op, "apply", "-f", "-")
		if err := <-created; err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, func() string {
			out, err := kubectl(t, "", "-n", ns, "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.annotations.e2e\.dcontroller\.io/n}{end}`)
			if err != nil || out != "11111" {
				return fmt.Sprintf("annotations %q (err %v)", out, err)
			}
			return ""
		})
		// The echoes of the writes have reached the manager by now; a
		// second write would have been sent within milliseconds.
		time.Sleep(2 * time.Second)
		if n := serverRequests(t, "pods")["PATCH pods"] - before; n != 5 {
			t.Errorf("start %d: %v PATCHes of pods for 5 pods, want 5", round, n)
		}
		mustKubectl(t, "", "delete", "operators.dcontroller.io", name)
	}
}
