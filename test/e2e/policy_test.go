package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dcontroller/dcontroller/pkg/controller"
)

// handoffOperator writes a Deployment per ConfigMap of e2e-handoff-<type>,
// with 2 replicas and the ConfigMap's image, and hands spec.replicas off.
func handoffOperator(typ string) string {
	return fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: handoff-%[1]s
spec:
  controllers:
    - name: deploy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-handoff-%[1]s}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec:
            replicas: 2
            selector: {matchLabels: {app: "$.metadata.name"}}
            template:
              metadata: {labels: {app: "$.metadata.name"}}
              spec:
                containers: [{name: app, image: "$.data.image"}]
      target:
        apiGroup: apps
        kind: Deployment
        type: %[2]s
        externalFields: [spec.replicas]
`, strings.ToLower(typ), typ)
}

// operatorCondition returns "<status> <reason> <message>" of the Ready
// condition of the first controller of an Operator.
func operatorCondition(t *testing.T, name string) string {
	out, _ := kubectl(t, "", "get", "operators.dcontroller.io", name, "-o",
		`jsonpath={.status.controllers[0].conditions[?(@.type=="Ready")].status} {.status.controllers[0].conditions[?(@.type=="Ready")].reason} {.status.controllers[0].conditions[?(@.type=="Ready")].message}`)
	return out
}

// TestExternalFieldsHandOff: a Deployment target with externalFields
// [spec.replicas], written by an Updater and by an Applier. The replicas
// are written at creation; a scale through the scale subresource (another
// field manager) stays, also across a change of the output and a restore
// of another field; an image changed by another writer is restored; the
// controller stays Ready, never TargetContested. The managedFields are
// read from the API server a few times per object, not per event.
func TestExternalFieldsHandOff(t *testing.T) {
	startManager(t)
	for _, typ := range []string{"Updater", "Applier"} {
		t.Run(typ, func(t *testing.T) {
			ns := "e2e-handoff-" + strings.ToLower(typ)
			op := "handoff-" + strings.ToLower(typ)
			mustKubectl(t, "", "create", "namespace", ns)
			mustKubectl(t, handoffOperator(typ), "apply", "-f", "-")
			mustKubectl(t, "", "-n", ns, "create", "configmap", "web", "--from-literal=image=nginx:1")
			deploy := func() string {
				out, _ := kubectl(t, "", "-n", ns, "get", "deployment", "web", "-o", `jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}`)
				return out
			}
			want := func(w string) func() string {
				return func() string {
					if got := deploy(); got != w {
						return fmt.Sprintf("deployment %q, want %q", got, w)
					}
					return ""
				}
			}
			eventually(t, 30*time.Second, want("2 nginx:1"))
			// Another field manager scales it through the scale subresource.
			mustKubectl(t, "", "-n", ns, "scale", "deployment", "web", "--replicas=5")
			eventually(t, 10*time.Second, want("5 nginx:1"))
			// The output changes: the image is written, the replicas stay.
			mustKubectl(t, "", "-n", ns, "patch", "configmap", "web", "--type=merge", "-p", `{"data":{"image":"nginx:2"}}`)
			eventually(t, 20*time.Second, want("5 nginx:2"))
			// Another writer changes the image: it is restored, the
			// replicas stay.
			mustKubectl(t, "", "-n", ns, "set", "image", "deployment/web", "app=nginx:3")
			eventually(t, 20*time.Second, want("5 nginx:2"))
			// Again, with another manager and a patch of the replicas.
			mustKubectl(t, "", "-n", ns, "patch", "deployment", "web", "--field-manager=autoscaler", "--type=merge", "-p", `{"spec":{"replicas":4}}`)
			mustKubectl(t, "", "-n", ns, "set", "image", "deployment/web", "app=nginx:4")
			eventually(t, 20*time.Second, want("4 nginx:2"))
			// Nothing fights over the replicas: they stay for a while, the
			// controller is Ready and not contested, the deployment
			// controller's status updates meanwhile notwithstanding.
			for range 6 {
				time.Sleep(500 * time.Millisecond)
				if got := deploy(); got != "4 nginx:2" {
					t.Fatalf("deployment %q after the hand-off, want 4 nginx:2", got)
				}
			}
			eventually(t, 20*time.Second, func() string {
				if c := operatorCondition(t, op); !strings.HasPrefix(c, "True Ready") {
					return "Ready condition: " + c
				}
				return ""
			})
			// A new object gets the replicas of the output at creation.
			mustKubectl(t, "", "-n", ns, "create", "configmap", "api", "--from-literal=image=nginx:1")
			eventually(t, 30*time.Second, func() string {
				out, _ := kubectl(t, "", "-n", ns, "get", "deployment", "api", "-o", `jsonpath={.spec.replicas}`)
				if out != "2" {
					return "new deployment replicas " + out
				}
				return ""
			})
			reads := testutil.ToFloat64(controller.TargetLiveReads.WithLabelValues(op, "deploy"))
			t.Logf("%s: %v reads of managedFields from the API server for 2 objects, 2 hand-offs and 2 restores", typ, reads)
			if reads < 1 || reads > 6 {
				t.Errorf("%v reads of managedFields, want 1 to 6", reads)
			}
			mustKubectl(t, "", "delete", "operators.dcontroller.io", op)
			mustKubectl(t, "", "delete", "namespace", ns, "--wait=false")
		})
	}
}

// patcherHandoffOperator patches a label tier and a label team onto the
// ConfigMap "target" from the ConfigMap "source", handing tier off.
const patcherHandoffOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: handoff-patcher
spec:
  controllers:
    - name: label
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-handoff-patcher, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: target
            namespace: "$.metadata.namespace"
            labels: {tier: "$.data.tier", team: "$.data.team"}
      target:
        apiGroup: ""
        kind: ConfigMap
        type: Patcher
        externalFields: [metadata.labels.tier]
`

// TestExternalFieldsPatcher: a Patcher sets a handed-off label while no
// other field manager has written it; once one has, the label is left out
// of the patch and of the Patcher's record (so it is not restored, and
// not removed when the output goes), while the other label is restored
// and removed as before.
func TestExternalFieldsPatcher(t *testing.T) {
	startManager(t)
	const ns = "e2e-handoff-patcher"
	mustKubectl(t, "", "create", "namespace", ns)
	// With a field: the API server tracks no managedFields on an object
	// created without any, so no hand-off could be seen on it.
	mustKubectl(t, "", "-n", ns, "create", "configmap", "target", "--from-literal=x=y")
	mustKubectl(t, patcherHandoffOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "source", "--from-literal=tier=gold", "--from-literal=team=a")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "source", "role=source")
	labels := func() (map[string]string, string) {
		out, _ := kubectl(t, "", "-n", ns, "get", "configmap", "target", "-o", `jsonpath={.metadata.labels}{"\n"}{.metadata.annotations.patcher\.dcontroller\.io/handoff-patcher_label}`)
		l, rec, _ := strings.Cut(out, "\n")
		return jsonMap(t, l), rec
	}
	want := func(tier, team string, recorded ...string) func() string {
		return func() string {
			l, rec := labels()
			var got []string
			_ = json.Unmarshal([]byte(rec), &got)
			if l["tier"] != tier || l["team"] != team || strings.Join(got, ",") != strings.Join(recorded, ",") {
				return fmt.Sprintf("labels %v record %q, want tier %q team %q record %v", l, rec, tier, team, recorded)
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, want("gold", "a", "/metadata/labels/team", "/metadata/labels/tier"))
	// Another manager takes tier over; someone changes team too.
	mustKubectl(t, "", "-n", ns, "label", "configmap", "target", "--overwrite", "tier=silver", "team=b")
	eventually(t, 20*time.Second, want("silver", "a", "/metadata/labels/team"))
	// The output changes tier: it stays the other manager's.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "source", "--type=merge", "-p", `{"data":{"tier":"bronze","team":"c"}}`)
	eventually(t, 20*time.Second, want("silver", "c", "/metadata/labels/team"))
	// The output goes: team is removed, tier stays.
	mustKubectl(t, "", "-n", ns, "delete", "configmap", "source")
	eventually(t, 20*time.Second, want("silver", ""))
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "handoff-patcher")
	mustKubectl(t, "", "delete", "namespace", ns, "--wait=false")
}

// orphanOperator has an Updater, a Patcher and an Applier with
// deletionPolicy Orphan, each writing from the ConfigMaps of
// e2e-orphan labelled role=source.
const orphanOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: orphan
spec:
  controllers:
    - name: update
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-orphan, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-updated"]}
            namespace: "$.metadata.namespace"
            labels: {made-by: orphan}
          data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap, deletionPolicy: Orphan}
    - name: patch
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-orphan, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-patched"]}
            namespace: "$.metadata.namespace"
          data: {patched: "yes"}
      target: {apiGroup: "", kind: ConfigMap, type: Patcher, deletionPolicy: Orphan}
    - name: apply
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-orphan, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-applied"]}
            namespace: "$.metadata.namespace"
          data: {applied: "yes"}
      target: {apiGroup: "", kind: ConfigMap, type: Applier, deletionPolicy: Orphan}
`

// TestDeletionPolicyOrphan: with deletionPolicy Orphan, an output that
// goes leaves its objects and their content and removes only the marks
// (the Updater's owner and managed-metadata annotations, the Patcher's
// record, the Applier's managedFields entry); deleting the Operator does
// the same for the objects of the outputs that remain.
func TestDeletionPolicyOrphan(t *testing.T) {
	startManager(t)
	const ns = "e2e-orphan"
	mustKubectl(t, "", "create", "namespace", ns)
	for _, n := range []string{"a", "b"} {
		mustKubectl(t, "", "-n", ns, "create", "configmap", n+"-patched")
	}
	mustKubectl(t, orphanOperator, "apply", "-f", "-")
	for _, n := range []string{"a", "b"} {
		mustKubectl(t, "", "-n", ns, "create", "configmap", n)
		mustKubectl(t, "", "-n", ns, "label", "configmap", n, "role=source")
	}
	// state returns what the three objects of source n hold: data and
	// marks.
	state := func(n string) string {
		var b strings.Builder
		for _, suffix := range []string{"updated", "patched", "applied"} {
			// The Applier's mark is its field manager's entry (the others
			// write with that field manager too, an operation Update entry
			// that is no mark).
			path := `jsonpath={.data} {.metadata.annotations}`
			if suffix == "applied" {
				path = `jsonpath={.data} {.metadata.annotations} {.metadata.managedFields[?(@.operation=="Apply")].manager}`
			}
			out, err := kubectl(t, "", "-n", ns, "get", "configmap", n+"-"+suffix, "--show-managed-fields", "-o", path)
			if err != nil {
				out = "missing"
			}
			fmt.Fprintf(&b, "%s: %s\n", suffix, out)
		}
		return b.String()
	}
	marked := func(n string) func() string {
		return func() string {
			s := state(n)
			if !strings.Contains(s, `"dcontroller.io/owner":"orphan/update"`) || !strings.Contains(s, "patcher.dcontroller.io/orphan_patch") ||
				!strings.Contains(s, "dcontroller-orphan") || strings.Contains(s, "missing") {
				return "objects not written yet:\n" + s
			}
			return ""
		}
	}
	unmarked := func(n string) func() string {
		return func() string {
			s := state(n)
			if strings.Contains(s, "dcontroller.io/owner") || strings.Contains(s, "dcontroller.io/managed-metadata") ||
				strings.Contains(s, "patcher.dcontroller.io") || strings.Contains(s, "dcontroller-orphan") {
				return "marks left:\n" + s
			}
			for _, w := range []string{fmt.Sprintf(`updated: {"from":"%s"}`, n), `patched: {"patched":"yes"}`, `applied: {"applied":"yes"}`} {
				if !strings.Contains(s, w) {
					return fmt.Sprintf("want %q in:\n%s", w, s)
				}
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, marked("a"))
	eventually(t, 30*time.Second, marked("b"))
	// The output of a goes.
	mustKubectl(t, "", "-n", ns, "delete", "configmap", "a")
	eventually(t, 20*time.Second, unmarked("a"))
	// The Operator goes.
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "orphan")
	eventually(t, 20*time.Second, unmarked("b"))
	mustKubectl(t, "", "delete", "namespace", ns, "--wait=false")
}

// adoptionOperator writes a ConfigMap <name>-out per ConfigMap of
// e2e-adoption labelled role=source, with adoption Adopt (controller
// adopt) or Create (controller create, to <name>-new).
const adoptionOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: adoption
spec:
  controllers:
    - name: adopt
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-adoption, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-adopted"]}
            namespace: "$.metadata.namespace"
          data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap, adoption: Adopt}
    - name: create
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-adoption, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-created"]}
            namespace: "$.metadata.namespace"
          data: {from: "$.metadata.name"}
      target: {apiGroup: "", kind: ConfigMap, adoption: Create}
`

// TestAdoption: adoption Adopt never creates (the status names the
// missing object) and writes the object once someone else creates it;
// adoption Create creates a missing object and refuses an existing one it
// did not create with OwnerConflict, leaving it as it is.
func TestAdoption(t *testing.T) {
	startManager(t)
	const ns = "e2e-adoption"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, "", "-n", ns, "create", "configmap", "b-created", "--from-literal=mine=yes")
	mustKubectl(t, adoptionOperator, "apply", "-f", "-")
	for _, n := range []string{"a", "b"} {
		mustKubectl(t, "", "-n", ns, "create", "configmap", n)
		mustKubectl(t, "", "-n", ns, "label", "configmap", n, "role=source")
	}
	cond := func(i int) string {
		out, _ := kubectl(t, "", "get", "operators.dcontroller.io", "adoption", "-o",
			fmt.Sprintf(`jsonpath={.status.controllers[%d].conditions[?(@.type=="Ready")].reason} {.status.controllers[%d].conditions[?(@.type=="Ready")].message}`, i, i))
		return out
	}
	data := func(name string) string {
		out, err := kubectl(t, "", "-n", ns, "get", "configmap", name, "-o", `jsonpath={.data} {.metadata.annotations.dcontroller\.io/owner}`)
		if err != nil {
			return "missing"
		}
		return out
	}
	// Adopt: nothing is created; the status names the missing objects.
	eventually(t, 30*time.Second, func() string {
		if c := cond(0); !strings.HasPrefix(c, "WriteFailed") || !strings.Contains(c, "a-adopted") && !strings.Contains(c, "b-adopted") ||
			!strings.Contains(c, "adoption Adopt does not create") {
			return "adopt condition: " + c
		}
		return ""
	})
	for _, n := range []string{"a-adopted", "b-adopted"} {
		if d := data(n); d != "missing" {
			t.Fatalf("%s was created by a target with adoption Adopt: %s", n, d)
		}
	}
	// Create: a-created is created, b-created (not ours) is refused.
	eventually(t, 30*time.Second, func() string {
		if c := cond(1); !strings.HasPrefix(c, "OwnerConflict") || !strings.Contains(c, "b-created exists and carries no dcontroller.io/owner annotation") {
			return "create condition: " + c
		}
		if d := data("a-created"); d != `{"from":"a"} adoption/create` {
			return "a-created: " + d
		}
		return ""
	})
	if d := data("b-created"); d != `{"mine":"yes"} ` {
		t.Fatalf("b-created was written by a target with adoption Create: %s", d)
	}
	// Someone creates the objects Adopt waits for: they are written.
	mustKubectl(t, "", "-n", ns, "create", "configmap", "a-adopted")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "b-adopted")
	eventually(t, 60*time.Second, func() string {
		if a, b := data("a-adopted"), data("b-adopted"); a != `{"from":"a"} adoption/adopt` || b != `{"from":"b"} adoption/adopt` {
			return fmt.Sprintf("adopted objects: %s; %s", a, b)
		}
		if c := cond(0); !strings.HasPrefix(c, "Ready") {
			return "adopt condition: " + c
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "adoption")
	mustKubectl(t, "", "delete", "namespace", ns, "--wait=false")
}
