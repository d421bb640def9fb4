package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestUpdaterKeepsOthersFinalizersAndOwners: an Updater writes a whole
// object, but the finalizers and owner references another controller put
// on its target object are not the output's: a write after a change of the
// output keeps them (an update without them would remove them), and when
// the other controller removes its finalizer the Updater does not write
// again for that.
func TestUpdaterKeepsOthersFinalizersAndOwners(t *testing.T) {
	startManager(t)
	const ns = "e2e-updater-metadata"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, fmt.Sprintf(`apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: updater-metadata
spec:
  controllers:
    - name: copy
      sources: [{apiGroup: "", kind: ConfigMap, namespace: %[1]s, labelSelector: {matchLabels: {role: source}}}]
      pipeline:
        "@project":
          metadata: {name: {"@concat": ["$.metadata.name", "-copy"]}, namespace: "$.metadata.namespace"}
          data: "$.data"
      target: {apiGroup: "", kind: ConfigMap, type: Updater}
`, ns), "apply", "-f", "-")
	mustKubectl(t, "", "-n", ns, "create", "configmap", "web", "--from-literal=v=1")
	mustKubectl(t, "", "-n", ns, "label", "configmap", "web", "role=source")
	get := func() string {
		out, _ := kubectl(t, "", "-n", ns, "get", "configmap", "web-copy", "-o",
			`jsonpath={.data.v} {.metadata.finalizers} {.metadata.ownerReferences[*].name}`)
		return out
	}
	want := func(w string) func() string {
		return func() string {
			if got := get(); got != w {
				return fmt.Sprintf("web-copy %q, want %q", got, w)
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, want("1  "))
	uid := mustKubectl(t, "", "-n", ns, "get", "configmap", "web", "-o", "jsonpath={.metadata.uid}")
	// Another controller puts its finalizer and an owner reference on it.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "web-copy", "--type=merge", "-p",
		fmt.Sprintf(`{"metadata":{"finalizers":["example.com/keep"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"web","uid":%q}]}}`, uid))
	eventually(t, 10*time.Second, want(`1 ["example.com/keep"] web`))
	// The output changes: the Updater writes the object; both stay.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "web", "--type=merge", "-p", `{"data":{"v":"2"}}`)
	eventually(t, 20*time.Second, want(`2 ["example.com/keep"] web`))
	for range 4 {
		time.Sleep(500 * time.Millisecond)
		if got := get(); got != `2 ["example.com/keep"] web` {
			t.Fatalf("web-copy %q after the write, want the finalizer and owner kept", got)
		}
	}
	// The other controller removes its finalizer: no write puts it back,
	// and the object's resourceVersion stays.
	mustKubectl(t, "", "-n", ns, "patch", "configmap", "web-copy", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	rv := mustKubectl(t, "", "-n", ns, "get", "configmap", "web-copy", "-o", "jsonpath={.metadata.resourceVersion}")
	time.Sleep(2 * time.Second)
	if got := mustKubectl(t, "", "-n", ns, "get", "configmap", "web-copy", "-o", "jsonpath={.metadata.resourceVersion} {.metadata.finalizers}"); got != rv+" " {
		t.Fatalf("web-copy resourceVersion and finalizers %q after the finalizer's removal, want %q (no write)", got, rv+" ")
	}
	mustKubectl(t, "", "delete", "operator", "updater-metadata")
	mustKubectl(t, "", "delete", "namespace", ns, "--wait=false")
}
