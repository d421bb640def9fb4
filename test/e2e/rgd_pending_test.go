package e2e

import (
	"testing"
	"time"
)

const holdRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-hold}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Hold
    group: e2e.dcontroller.io
    spec:
      port: integer | default=8080
  resources:
    - id: lb
      readyWhen:
        - ${size(lb.status.loadBalancer.ingress) > 0}
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${schema.metadata.name}-lb"}
        spec:
          type: LoadBalancer
          selector: {app: "${schema.metadata.name}"}
          ports: [{port: 80}]
    - id: front
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${schema.metadata.name}-front"}
        spec:
          selector: ${lb.spec.selector}
          ports: [{port: "${schema.spec.port}"}]
`

// TestRGDPendingKeepsDependent: a Service that depends on another's
// readiness is created once that one is ready; when the readiness flips to
// false (as a Deployment's does on every scale-up) and while a change of
// the instance waits for it, the dependent Service is left as it is (same
// uid, same clusterIP, old port), the instance IN_PROGRESS naming it; when
// the readiness is back the same Service is updated, the instance ACTIVE.
func TestRGDPendingKeepsDependent(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-hold", "e2e-hold", "holds.e2e.dcontroller.io", holdRGD)
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Hold\nmetadata: {name: h1, namespace: e2e-rgd-hold}\nspec: {port: 8080}\n", "apply", "-f", "-")
	f.wantNames("services", "h1", "h1-lb")
	ready := func(ip string) {
		t.Helper()
		status := `{"status":{"loadBalancer":{"ingress":null}}}`
		if ip != "" {
			status = `{"status":{"loadBalancer":{"ingress":[{"ip":"` + ip + `"}]}}}`
		}
		mustKubectl(t, "", "-n", f.ns, "patch", "service", "h1-lb", "--subresource=status", "--type=merge", "-p", status)
	}
	ready("192.0.2.7")
	f.want("services", "h1-front", "{.spec.ports[0].port}", "8080")
	f.want("holds", "h1", `{.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "ACTIVE True")
	identity := f.get("services", "h1-front", "{.metadata.uid} {.spec.clusterIP}")
	if len(identity) < 10 {
		t.Fatalf("front Service uid and clusterIP: %q", identity)
	}

	t.Log("the load balancer goes: the dependent stays as it is")
	ready("")
	f.want("holds", "h1", "{.status.state}", "IN_PROGRESS")
	f.holds(5*time.Second, "services", "h1-front", "{.metadata.uid} {.spec.clusterIP}", identity)
	f.want("holds", "h1", `{.status.conditions[?(@.type=="ResourcesReady")].message}`,
		"waiting for resources to resolve, exist and be ready: lb, front")

	t.Log("the instance changes while it waits: the dependent keeps its old port")
	mustKubectl(t, "", "-n", f.ns, "patch", "holds", "h1", "--type=merge", "-p", `{"spec":{"port":9090}}`)
	f.holds(5*time.Second, "services", "h1-front", "{.metadata.uid} {.spec.clusterIP} {.spec.ports[0].port}", identity+" 8080")

	t.Log("the load balancer is back: the same Service is updated")
	ready("192.0.2.8")
	f.want("services", "h1-front", "{.metadata.uid} {.spec.clusterIP} {.spec.ports[0].port}", identity+" 9090")
	f.want("holds", "h1", `{.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "ACTIVE True")

	t.Log("the instance is deleted: so are its resources")
	mustKubectl(t, "", "-n", f.ns, "delete", "holds", "h1")
	f.wantNames("services", "h1", "")
}

const keepRefRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-keepref}
spec:
  schema:
    apiVersion: v1alpha1
    kind: KeepRef
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
    - id: data
      template:
        apiVersion: v1
        kind: Secret
        metadata: {name: "${schema.metadata.name}-data"}
        stringData: {from: "${app.metadata.name}"}
`

// TestRGDExternalRefDeletedKeepsDependents: deleting the object an
// externalRef names leaves the resources that read it (and theirs) as they
// are, the instance IN_PROGRESS; created again, the same objects follow it
// and the instance is ACTIVE.
func TestRGDExternalRefDeletedKeepsDependents(t *testing.T) {
	f := newRGDFixture(t, "e2e-rgd-keepref", "e2e-keepref", "keeprefs.e2e.dcontroller.io", keepRefRGD)
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform, namespace: e2e-rgd-keepref}\ndata: {level: debug}\n", "apply", "-f", "-")
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: KeepRef\nmetadata: {name: k1, namespace: e2e-rgd-keepref}\nspec: {configName: platform}\n", "apply", "-f", "-")
	f.want("configmaps", "k1-app", "{.data.level}", "debug")
	f.want("secrets", "k1-data", "{.data.from}", "azEtYXBw") // base64 of k1-app
	f.want("keeprefs", "k1", `{.status.level} {.status.state}`, "debug ACTIVE")
	app := f.get("configmaps", "k1-app", "{.metadata.uid}")
	data := f.get("secrets", "k1-data", "{.metadata.uid}")

	t.Log("the referenced ConfigMap is deleted: the dependents stay")
	mustKubectl(t, "", "-n", f.ns, "delete", "configmap", "platform")
	f.want("keeprefs", "k1", `{.status.state} {.status.conditions[?(@.type=="Ready")].status}`, "IN_PROGRESS False")
	f.holds(5*time.Second, "configmaps", "k1-app", "{.metadata.uid} {.data.level}", app+" debug")
	f.holds(time.Second, "secrets", "k1-data", "{.metadata.uid}", data)

	t.Log("it is created again: the same objects follow it")
	mustKubectl(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: platform, namespace: e2e-rgd-keepref}\ndata: {level: info}\n", "apply", "-f", "-")
	f.want("configmaps", "k1-app", "{.metadata.uid} {.data.level}", app+" info")
	f.want("keeprefs", "k1", `{.status.level} {.status.state}`, "info ACTIVE")
	if got := f.get("secrets", "k1-data", "{.metadata.uid}"); got != data {
		t.Fatalf("the Secret was replaced: uid %s, was %s", got, data)
	}
}
