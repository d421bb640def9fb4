package e2e

import (
	"crypto/sha1" // #nosec G505 -- Metacontroller's ControllerRevision name hash
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMetacontrollerCompatNoStatusSubresource: a parent whose CRD has no
// status subresource gets its status by an update of the whole object,
// and a Warning Event with Metacontroller's reason (SyncError) and words
// ("does not have subresource 'Status' enabled"), once per status write:
// one write, one Event, no series of repeats.
func TestMetacontrollerCompatNoStatusSubresource(t *testing.T) {
	const ns = "e2e-mc-compat-nostatus"
	mustKubectl(t, crdYAMLNoStatus("Bare", "bares", "Namespaced"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/bares.e2e.dcontroller.io")
	mustKubectl(t, "", "create", "namespace", ns)
	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		return map[string]any{"status": map[string]any{"seen": path(req, "parent.spec.v")}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: bare-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: bares}
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL))
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1\nkind: Bare\nmetadata: {name: b, namespace: "+ns+"}\nspec: {v: one}\n", "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Bare", ns, "b")
		if err != nil || str(path(p.Object, "status.seen")) != "one" {
			return fmt.Sprintf("status %v (%v)", p.Object["status"], err)
		}
		return ""
	})
	events := func() []string {
		out := mustKubectl(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=b,reason=SyncError",
			"-o", `jsonpath={range .items[*]}{.type}|{.series.count}|{.message}{"\n"}{end}`)
		if out = strings.TrimSpace(out); out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	eventually(t, 30*time.Second, func() string {
		ev := events()
		if len(ev) != 1 {
			return fmt.Sprintf("SyncError events %q, want one", ev)
		}
		msg := ev[0]
		for _, want := range []string{"Warning||", "[bare-controller] Sync error - CRD [bares.e2e.dcontroller.io] does not have subresource 'Status' enabled"} {
			if !strings.Contains(msg, want) {
				return fmt.Sprintf("event %q lacks %q", msg, want)
			}
		}
		return ""
	})
	stable(t, h, 2*time.Second)
	if ev := events(); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning||") {
		t.Errorf("after the parent settled: SyncError events %q, want the one, without repeats", ev)
	}
}

// TestMetacontrollerCompatRelatedV2OtherNamespace: with a v2 customize
// hook, a namespaced parent's related rules reach another namespace (a
// labelSelector in a named namespace) and a cluster-scoped resource; the
// v2 sync request keys them "<namespace>/<name>" and "<name>"; a change of
// a related object in the other namespace resyncs the parent.
func TestMetacontrollerCompatRelatedV2OtherNamespace(t *testing.T) {
	const src, dst = "e2e-mc-compat-source", "e2e-mc-compat-target"
	installCRD(t, "ConfigMapList", "configmaplists", "Namespaced")
	for _, ns := range []string{src, dst} {
		mustKubectl(t, "", "create", "namespace", ns)
	}
	for _, cm := range []struct{ ns, name, label string }{{src, "a", "yes"}, {src, "b", "yes"}, {src, "c", "no"}, {dst, "d", "yes"}} {
		mustKubectl(t, "", "-n", cm.ns, "create", "configmap", cm.name)
		mustKubectl(t, "", "-n", cm.ns, "label", "configmap", cm.name, "list="+cm.label)
	}
	startManager(t)
	customize := newHookServer(t, func(req map[string]any) any {
		source := str(path(req, "parent.spec.sourceNamespace"))
		return map[string]any{"relatedResources": []any{
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "namespace": source,
				"labelSelector": map[string]any{"matchLabels": map[string]any{"list": "yes"}}},
			map[string]any{"apiVersion": "v1", "resource": "namespaces", "names": []any{source}},
		}}
	})
	keys := func(m any) string {
		mm, _ := m.(map[string]any)
		var out []string
		for k := range mm {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	sync := newHookServer(t, func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		related, _ := req["related"].(map[string]any)
		return map[string]any{"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": str(path(parent, "metadata.name")) + "-list"},
			"data":     map[string]any{"configmaps": keys(related["ConfigMap.v1"]), "namespaces": keys(related["Namespace.v1"])},
		}}}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: configmaplist-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: configmaplists}
  childResources:
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    customize: {version: v2, webhook: {url: %s}}
    sync: {version: v2, webhook: {url: %s}}
`, customize.URL, sync.URL))
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1\nkind: ConfigMapList\nmetadata: {name: l, namespace: "+dst+"}\nspec: {sourceNamespace: "+src+"}\n", "apply", "-f", "-")

	listed := func(want string) func() string {
		return func() string {
			cm, err := getObj(t, "v1", "ConfigMap", dst, "l-list")
			if err != nil {
				return err.Error()
			}
			if got := str(path(cm.Object, "data.configmaps")) + " " + str(path(cm.Object, "data.namespaces")); got != want {
				return fmt.Sprintf("the child lists %q, want %q", got, want)
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, listed(src+"/a,"+src+"/b "+src))

	// A related object of the other namespace changes: the parent resyncs.
	mustKubectl(t, "", "-n", src, "label", "--overwrite", "configmap", "c", "list=yes")
	eventually(t, 30*time.Second, listed(src+"/a,"+src+"/b,"+src+"/c "+src))
	mustKubectl(t, "", "-n", src, "delete", "configmap", "a")
	eventually(t, 30*time.Second, listed(src+"/b,"+src+"/c "+src))
}

// TestMetacontrollerCompatRevisionAdoption: an orphaned ControllerRevision
// as Metacontroller leaves it (its name, labels and parentPatch, no owner)
// is adopted by the parent it matches and serves as its latest revision:
// no second revision is created for the same state. A revision with the
// same labels controlled by another live object is left alone. A rollout
// then proceeds from the adopted revision, which is deleted once empty.
func TestMetacontrollerCompatRevisionAdoption(t *testing.T) {
	const ns = "e2e-mc-compat-adopt"
	installCRD(t, "AdoptWorker", "adoptworkers", "Namespaced")
	installCRD(t, "AdoptSet", "adoptsets", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	parentYAML := func(version string) string {
		return "apiVersion: e2e.dcontroller.io/v1\nkind: AdoptSet\nmetadata: {name: web, namespace: " + ns +
			"}\nspec:\n  replicas: 2\n  template: {version: " + version + "}\n"
	}
	mustKubectl(t, parentYAML("v1"), "apply", "-f", "-")
	parent, err := getObj(t, "e2e.dcontroller.io/v1", "AdoptSet", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	uid := string(parent.GetUID())

	// The revision Metacontroller would have written for this parent at
	// template v1 (revisionHistory.fieldPaths [spec.template]), its owner
	// reference gone.
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"version": "v1"}}})
	sum := sha1.Sum(append([]byte(uid), patch...)) // #nosec G401 -- Metacontroller's name hash
	orphan := "adoptsets.e2e.dcontroller.io-" + hex.EncodeToString(sum[:])
	revisionYAML := func(name, owner string) string {
		return fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: ControllerRevision
metadata:
  name: %s
  namespace: %s
  labels: {controller-uid: %s, metacontroller.k8s.io/apiGroup: e2e.dcontroller.io, metacontroller.k8s.io/resource: adoptsets}
%sparentPatch: %s
children:
  - {apiGroup: e2e.dcontroller.io, kind: AdoptWorker, names: [web-0, web-1]}
`, name, ns, uid, owner, patch)
	}
	mustKubectl(t, revisionYAML(orphan, ""), "apply", "-f", "-")
	// The same labels, controlled by another live object.
	mustKubectl(t, "", "-n", ns, "create", "configmap", "other-owner")
	owner, err := getObj(t, "v1", "ConfigMap", ns, "other-owner")
	if err != nil {
		t.Fatal(err)
	}
	foreignOwner := fmt.Sprintf("  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: other-owner, uid: %s, controller: true}]\n", owner.GetUID())
	mustKubectl(t, revisionYAML("adoptsets.e2e.dcontroller.io-foreign", foreignOwner), "apply", "-f", "-")

	startManager(t)
	h := newHookServer(t, func(req map[string]any) any {
		parent, _ := req["parent"].(map[string]any)
		n, _ := path(parent, "spec.replicas").(float64)
		var children []any
		for i := 0; i < int(n); i++ {
			children = append(children, map[string]any{
				"apiVersion": "e2e.dcontroller.io/v1", "kind": "AdoptWorker",
				"metadata": map[string]any{"name": fmt.Sprintf("web-%d", i)},
				"spec":     map[string]any{"version": path(parent, "spec.template.version")},
			})
		}
		return map[string]any{"children": children}
	})
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: adoptset-controller}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: adoptsets
    revisionHistory: {fieldPaths: [spec.template]}
  childResources:
    - apiVersion: e2e.dcontroller.io/v1
      resource: adoptworkers
      updateStrategy: {method: RollingInPlace}
  hooks:
    sync: {webhook: {url: %s}}
`, h.URL))

	workers := func() string {
		var out []string
		for _, w := range listObjs(t, "e2e.dcontroller.io/v1", "AdoptWorker", ns) {
			out = append(out, w.GetName()+"="+str(path(w.Object, "spec.version")))
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	// revisions lists the ControllerRevisions as name=controller-UID.
	revisions := func() map[string]string {
		out := map[string]string{}
		for _, r := range listObjs(t, "metacontroller.k8s.io/v1alpha1", "ControllerRevision", ns) {
			ctl := ""
			if ref := metav1.GetControllerOf(&r); ref != nil {
				ctl = string(ref.UID)
			}
			out[r.GetName()] = ctl
		}
		return out
	}
	eventually(t, 30*time.Second, func() string {
		if w := workers(); w != "web-0=v1,web-1=v1" {
			return "workers " + w
		}
		if revs := revisions(); revs[orphan] != uid {
			return fmt.Sprintf("revisions %v: %s not adopted by %s", revs, orphan, uid)
		}
		return ""
	})
	stable(t, h, time.Second)
	revs := revisions()
	if len(revs) != 2 || revs[orphan] != uid || revs["adoptsets.e2e.dcontroller.io-foreign"] != string(owner.GetUID()) {
		t.Fatalf("revisions %v: want only the adopted %s (controller %s) and the foreign one (controller %s)", revs, orphan, uid, owner.GetUID())
	}
	r, err := getObj(t, "metacontroller.k8s.io/v1alpha1", "ControllerRevision", ns, orphan)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(path(r.Object, "parentPatch")); got != "map[spec:map[template:map[version:v1]]]" {
		t.Errorf("adopted parentPatch %s", got)
	}

	// A rollout from the adopted revision: it ends at a new revision, the
	// adopted one deleted once empty, the foreign one untouched.
	mustKubectl(t, parentYAML("v2"), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		if w := workers(); w != "web-0=v2,web-1=v2" {
			return "workers " + w
		}
		revs := revisions()
		if _, ok := revs[orphan]; ok || len(revs) != 2 || revs["adoptsets.e2e.dcontroller.io-foreign"] != string(owner.GetUID()) {
			return fmt.Sprintf("revisions %v: want the new one and the foreign one", revs)
		}
		return ""
	})
}
