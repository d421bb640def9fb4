package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

// rgdFixture runs the RGD reconciler, applies rgd in a fresh namespace and
// waits until the RGD is Ready; it returns helpers that read the
// namespace's objects.
type rgdFixture struct {
	t  *testing.T
	ns string
}

func newRGDFixture(t *testing.T, ns, name, crd, rgd string) *rgdFixture {
	t.Helper()
	startRGDManager(t)
	cleanupRGD(t, name, crd)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, rgd, "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		g, err := getRGD(t, name)
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, "True") {
			return "Ready " + c
		}
		return ""
	})
	return &rgdFixture{t: t, ns: ns}
}

// get returns the jsonpath of an object in the namespace, or "error: ...".
func (f *rgdFixture) get(kind, name, jsonpath string) string {
	out, err := kubectl(f.t, "", "-n", f.ns, "get", kind, name, "-o", "jsonpath="+jsonpath)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

// want waits until the jsonpath of an object is value.
func (f *rgdFixture) want(kind, name, jsonpath, value string) {
	f.t.Helper()
	eventually(f.t, 60*time.Second, func() string {
		if got := f.get(kind, name, jsonpath); got != value {
			return fmt.Sprintf("%s %s %s = %q, want %q", kind, name, jsonpath, got, value)
		}
		return ""
	})
}

// names lists the names of the objects of kind labelled with the instance.
func (f *rgdFixture) names(kind, instance string) string {
	out, err := kubectl(f.t, "", "-n", f.ns, "get", kind, "-l", "kro.run/instance-name="+instance, "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return "error: " + err.Error()
	}
	n := strings.Fields(out)
	sort.Strings(n)
	return strings.Join(n, " ")
}

// wantNames waits until the instance's objects of kind are names.
func (f *rgdFixture) wantNames(kind, instance, names string) {
	f.t.Helper()
	eventually(f.t, 60*time.Second, func() string {
		if got := f.names(kind, instance); got != names {
			return fmt.Sprintf("%s of %s: %q, want %q", kind, instance, got, names)
		}
		return ""
	})
}

// holds checks for d that the jsonpath of an object stays value.
func (f *rgdFixture) holds(d time.Duration, kind, name, jsonpath, value string) {
	f.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if got := f.get(kind, name, jsonpath); got != value {
			f.t.Fatalf("%s %s %s = %q, want it to stay %q", kind, name, jsonpath, got, value)
		}
	}
}

const toggleRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-toggle}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Toggle
    group: e2e.dcontroller.io
    spec:
      value: string | default="one"
      extra: boolean | default=false
    status:
      value: ${base.data.value}
  resources:
    - id: base
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-base"}
        data: {value: "${schema.spec.value}"}
    - id: extra
      includeWhen:
        - ${schema.spec.extra}
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-extra"}
        data: {from: "${base.data.value}"}
`

// TestRGDIncludeWhenFlip: an instance is created with includeWhen false
// (only the base resource), updated (the base follows), flipped to true
// (the extra resource appears), back to false (it is pruned, the base
// stays), and deleted (the base goes).
func TestRGDIncludeWhenFlip(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-toggle", "e2e-toggle", "toggles.e2e.dcontroller.io", toggleRGD)
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Toggle\nmetadata: {name: t1, namespace: e2e-rgd-toggle}\nspec: {}\n", "apply", "-f", "-")
	f.want("toggles", "t1", "{.status.value} {.status.state}", "one ACTIVE")
	f.wantNames("configmaps", "t1", "t1-base")

	f.t.Log("update: the base resource follows the instance")
	mustKubectl(t, "", "-n", f.ns, "patch", "toggles", "t1", "--type=merge", "-p", `{"spec":{"value":"two"}}`)
	f.want("configmaps", "t1-base", "{.data.value}", "two")
	f.want("toggles", "t1", "{.status.value}", "two")
	f.wantNames("configmaps", "t1", "t1-base")

	f.t.Log("includeWhen turns true: the extra resource appears")
	mustKubectl(t, "", "-n", f.ns, "patch", "toggles", "t1", "--type=merge", "-p", `{"spec":{"extra":true}}`)
	f.wantNames("configmaps", "t1", "t1-base t1-extra")
	f.want("configmaps", "t1-extra", `{.data.from} {.metadata.labels.kro\.run/node-id}`, "two extra")
	f.want("toggles", "t1", "{.status.state}", "ACTIVE")

	f.t.Log("includeWhen turns false: the extra resource is pruned")
	mustKubectl(t, "", "-n", f.ns, "patch", "toggles", "t1", "--type=merge", "-p", `{"spec":{"extra":false}}`)
	f.wantNames("configmaps", "t1", "t1-base")
	f.want("toggles", "t1", "{.status.state}", "ACTIVE")

	f.t.Log("delete: the instance's resources go")
	mustKubectl(t, "", "-n", f.ns, "delete", "toggles", "t1")
	f.wantNames("configmaps", "t1", "")
}

const gateRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-gate}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Gate
    group: e2e.dcontroller.io
    spec: {}
    status:
      address: ${after.data.address}
  resources:
    - id: lb
      readyWhen:
        - ${size(lb.status.loadBalancer.ingress) > 0}
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${schema.metadata.name}"}
        spec:
          type: LoadBalancer
          selector: {app: "${schema.metadata.name}"}
          ports: [{port: 80}]
    - id: after
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-after"}
        data: {address: "${lb.status.loadBalancer.ingress[0].ip}"}
`

// TestRGDReadyWhenGating: a resource depending on a Service waits, the
// instance IN_PROGRESS, until the Service's readyWhen holds; setting its
// load balancer through the status subresource makes it ready, and the
// dependent appears with the address, the instance ACTIVE.
func TestRGDReadyWhenGating(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-gate", "e2e-gate", "gates.e2e.dcontroller.io", gateRGD)
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Gate\nmetadata: {name: g1, namespace: e2e-rgd-gate}\nspec: {}\n", "apply", "-f", "-")
	f.wantNames("services", "g1", "g1")
	f.want("gates", "g1", `{.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "IN_PROGRESS False")
	f.holds(5*time.Second, "gates", "g1", "{.status.state}", "IN_PROGRESS")
	if got := f.names("configmaps", "g1"); got != "" {
		t.Fatalf("the dependent exists while the Service is not ready: %q", got)
	}

	f.t.Log("the Service gets a load balancer: the dependent appears")
	mustKubectl(t, "", "-n", f.ns, "patch", "service", "g1", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.7"}]}}}`)
	f.want("configmaps", "g1-after", "{.data.address}", "192.0.2.7")
	f.want("gates", "g1", `{.status.address} {.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "192.0.2.7 ACTIVE True")
}

const fanRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-fan}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Fan
    group: e2e.dcontroller.io
    spec:
      names: "[]string"
    status:
      count: ${size(cms)}
  resources:
    - id: cms
      forEach:
        - name: ${schema.spec.names}
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name + '-' + name}"}
        data: {name: "${name}"}
`

// TestRGDForEachGrowShrink: a forEach over a list in the instance spec
// gives one resource per item; the list grows from 2 to 3 items and shrinks
// to 1, and the resources, their collection labels and the status follow.
func TestRGDForEachGrowShrink(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-fan", "e2e-fan", "fans.e2e.dcontroller.io", fanRGD)
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Fan\nmetadata: {name: f1, namespace: e2e-rgd-fan}\nspec: {names: [a, b]}\n", "apply", "-f", "-")
	f.wantNames("configmaps", "f1", "f1-a f1-b")
	f.want("configmaps", "f1-b", `{.data.name} {.metadata.labels.kro\.run/collection-index} {.metadata.labels.kro\.run/collection-size}`, "b 1 2")
	f.want("fans", "f1", "{.status.count} {.status.state}", "2 ACTIVE")

	f.t.Log("the list grows to 3 items")
	mustKubectl(t, "", "-n", f.ns, "patch", "fans", "f1", "--type=merge", "-p", `{"spec":{"names":["a","b","c"]}}`)
	f.wantNames("configmaps", "f1", "f1-a f1-b f1-c")
	f.want("configmaps", "f1-c", `{.data.name} {.metadata.labels.kro\.run/collection-index} {.metadata.labels.kro\.run/collection-size}`, "c 2 3")
	f.want("configmaps", "f1-a", `{.metadata.labels.kro\.run/collection-size}`, "3")
	f.want("fans", "f1", "{.status.count} {.status.state}", "3 ACTIVE")

	f.t.Log("the list shrinks to 1 item")
	mustKubectl(t, "", "-n", f.ns, "patch", "fans", "f1", "--type=merge", "-p", `{"spec":{"names":["b"]}}`)
	f.wantNames("configmaps", "f1", "f1-b")
	f.want("configmaps", "f1-b", `{.metadata.labels.kro\.run/collection-index} {.metadata.labels.kro\.run/collection-size}`, "0 1")
	f.want("fans", "f1", "{.status.count} {.status.state}", "1 ACTIVE")
}

const lateRefRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-lateref}
spec:
  schema:
    apiVersion: v1alpha1
    kind: LateRef
    group: e2e.dcontroller.io
    spec:
      configName: string | required=true
    status:
      level: ${platform.data.level}
  resources:
    - id: platform
      externalRef:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.configName}"}
    - id: app
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-app"}
        data: {level: "${platform.data.level}"}
`

// TestRGDExternalRefLate: an instance whose externalRef names a ConfigMap
// that does not exist yet waits, IN_PROGRESS and without its resources;
// once the ConfigMap is created its resources appear and it is ACTIVE; the
// referenced ConfigMap is read, never written; a change to it reaches the
// resources.
func TestRGDExternalRefLate(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-lateref", "e2e-lateref", "laterefs.e2e.dcontroller.io", lateRefRGD)
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: LateRef\nmetadata: {name: r1, namespace: e2e-rgd-lateref}\nspec: {configName: platform}\n", "apply", "-f", "-")
	f.want("laterefs", "r1", `{.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "IN_PROGRESS False")
	time.Sleep(3 * time.Second)
	if got := f.names("configmaps", "r1"); got != "" {
		t.Fatalf("resources before the externalRef exists: %q", got)
	}
	if got := f.get("laterefs", "r1", "{.status.state}"); got != "IN_PROGRESS" {
		t.Fatalf("state %q before the externalRef exists", got)
	}

	f.t.Log("the referenced ConfigMap is created: the resources appear")
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform, namespace: e2e-rgd-lateref}\ndata: {level: debug}\n", "apply", "-f", "-")
	f.want("configmaps", "r1-app", "{.data.level}", "debug")
	f.want("laterefs", "r1", `{.status.level} {.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "debug ACTIVE True")
	if got := f.get("configmaps", "platform", `{.metadata.labels} {.metadata.ownerReferences}`); got != " " {
		t.Errorf("the external ConfigMap was written: %q", got)
	}

	f.t.Log("the referenced ConfigMap changes: the resources follow")
	mustKubectl(t, "", "-n", f.ns, "patch", "configmap", "platform", "--type=merge", "-p", `{"data":{"level":"info"}}`)
	f.want("configmaps", "r1-app", "{.data.level}", "info")
	f.want("laterefs", "r1", "{.status.level}", "info")
}

const elsewhereRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-elsewhere}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Elsewhere
    group: e2e.dcontroller.io
    spec:
      target: string | required=true
  resources:
    - id: remote
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-remote", namespace: "${schema.spec.target}"}
        data: {from: "${schema.metadata.namespace}"}
    - id: local
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.metadata.name}-local"}
        data: {from: "${schema.metadata.namespace}"}
`

// TestRGDResourceInAnotherNamespace: a resource whose template names
// another namespace than the instance's gets no owner reference (the
// garbage collector would look the owner up in that namespace, not find
// it, and delete the resource over and over); it stays, the instance is
// ACTIVE, and deleting the instance still deletes it. A resource in the
// instance's namespace keeps its owner reference.
func TestRGDResourceInAnotherNamespace(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-here", "e2e-elsewhere", "elsewheres.e2e.dcontroller.io", elsewhereRGD)
	mustKubectl(t, "", "create", "namespace", "e2e-rgd-there")
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Elsewhere\nmetadata: {name: e1, namespace: e2e-rgd-here}\nspec: {target: e2e-rgd-there}\n", "apply", "-f", "-")
	there := &rgdFixture{t: t, ns: "e2e-rgd-there"}
	there.want("configmaps", "e1-remote", "{.data.from},{.metadata.ownerReferences}", "e2e-rgd-here,")
	f.want("configmaps", "e1-local", "{.metadata.ownerReferences[0].kind}", "Elsewhere")
	f.want("elsewheres", "e1", "{.status.state}", "ACTIVE")
	uid := there.get("configmaps", "e1-remote", "{.metadata.uid}")
	there.holds(10*time.Second, "configmaps", "e1-remote", "{.metadata.uid}", uid)

	mustKubectl(t, "", "-n", f.ns, "delete", "elsewheres", "e1")
	there.wantNames("configmaps", "e1", "")
	f.wantNames("configmaps", "e1", "")
}
