package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const chainOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: deployment-summary
spec:
  controllers:
    - name: summarize
      sources:
        - apiGroup: apps
          kind: Deployment
          namespace: e2e-chain
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
          spec:
            replicas: "$.spec.replicas"
            image: "$.spec.template.spec.containers[0].image"
      target:
        kind: DeploymentSummary
    - name: report
      sources:
        - kind: DeploymentSummary
      pipeline:
        "@project":
          metadata:
            name:
              "@concat": ["$.metadata.name", "-summary"]
            namespace: "$.metadata.namespace"
          data:
            replicas:
              "@string": "$.spec.replicas"
            image: "$.spec.image"
      target:
        apiGroup: ""
        kind: ConfigMap
`

func deploymentYAML(ns, name, image string, replicas int, annotations map[string]string) string {
	var ann strings.Builder
	if len(annotations) > 0 {
		ann.WriteString("  annotations:\n")
		for k, v := range annotations {
			fmt.Fprintf(&ann, "    %s: %q\n", k, v)
		}
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
%sspec:
  replicas: %d
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
        - name: main
          image: %s
`, name, ns, ann.String(), replicas, name, name, image)
}

// TestViewChainToConfigMap chains two controllers through a view and ends
// in a native ConfigMap that is created, updated and deleted with the
// source Deployment.
func TestViewChainToConfigMap(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-chain")
	mustKubectl(t, chainOperator, "apply", "-f", "-")
	mustKubectl(t, deploymentYAML("e2e-chain", "web", "nginx:1.25", 2, nil), "apply", "-f", "-")
	cm := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-chain", "get", "configmap", "web-summary", "-o", `jsonpath={.data.image} {.data.replicas} {.metadata.annotations.dcontroller\.io/owner}`)
	}
	eventually(t, 20*time.Second, func() string {
		if got, err := cm(); err != nil || got != "nginx:1.25 2 deployment-summary/report" {
			return fmt.Sprintf("configmap %q (err %v)", got, err)
		}
		return ""
	})
	mustKubectl(t, deploymentYAML("e2e-chain", "web", "nginx:1.27", 3, nil), "apply", "-f", "-")
	eventually(t, 20*time.Second, func() string {
		if got, err := cm(); err != nil || got != "nginx:1.27 3 deployment-summary/report" {
			return fmt.Sprintf("configmap after update %q (err %v)", got, err)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-chain", "delete", "deployment", "web")
	eventually(t, 20*time.Second, func() string {
		if out, err := cm(); err == nil || !strings.Contains(err.Error(), "NotFound") {
			return fmt.Sprintf("configmap still there: %q %v", out, err)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "deployment-summary")
}

const restartOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: config-restarter
spec:
  controllers:
    - name: restart-on-config-change
      sources:
        - apiGroup: apps
          kind: Deployment
          namespace: e2e-restart
        - apiGroup: ""
          kind: ConfigMap
          namespace: e2e-restart
      pipeline:
        - "@join":
            "@and":
              - "@eq": ["$.Deployment.metadata.namespace", "$.ConfigMap.metadata.namespace"]
              - "@eq": ["$.Deployment.metadata.annotations['dcontroller.io/config-map']", "$.ConfigMap.metadata.name"]
        - "@project":
            metadata:
              name: "$.Deployment.metadata.name"
              namespace: "$.Deployment.metadata.namespace"
            spec:
              template:
                metadata:
                  annotations:
                    "dcontroller.io/config-hash":
                      "@hash": "$.ConfigMap.data"
      target:
        apiGroup: apps
        kind: Deployment
        type: Applier
`

// TestConfigMapRestartsDeployment: a Deployment that names a ConfigMap gets
// a pod-template annotation with the hash of the ConfigMap's data, written
// with server-side apply, so editing the ConfigMap rolls the Deployment.
func TestConfigMapRestartsDeployment(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-restart")
	mustKubectl(t, restartOperator, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-restart", "create", "configmap", "app-config", "--from-literal=level=info")
	mustKubectl(t, deploymentYAML("e2e-restart", "app", "app:1", 1, map[string]string{"dcontroller.io/config-map": "app-config"}), "apply", "-f", "-")
	hash := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-restart", "get", "deployment", "app", "-o", `jsonpath={.spec.template.metadata.annotations.dcontroller\.io/config-hash}`)
	}
	var first string
	eventually(t, 20*time.Second, func() string {
		h, err := hash()
		if err != nil || len(h) != 6 {
			return fmt.Sprintf("hash annotation %q (err %v)", h, err)
		}
		first = h
		return ""
	})
	// The annotation is owned by the operator's field manager.
	managers := mustKubectl(t, "", "-n", "e2e-restart", "get", "deployment", "app", "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if !strings.Contains(managers, "dcontroller-config-restarter") {
		t.Errorf("field managers %q lack dcontroller-config-restarter", managers)
	}
	// The containers list the user applied is intact (server-side apply merges lists).
	if img := mustKubectl(t, "", "-n", "e2e-restart", "get", "deployment", "app", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != "app:1" {
		t.Errorf("container image %q", img)
	}
	mustKubectl(t, "", "-n", "e2e-restart", "patch", "configmap", "app-config", "--type=merge", "-p", `{"data":{"level":"debug"}}`)
	eventually(t, 20*time.Second, func() string {
		h, err := hash()
		if err != nil || h == first || len(h) != 6 {
			return fmt.Sprintf("hash %q did not change from %q (err %v)", h, first, err)
		}
		return ""
	})
	gen := mustKubectl(t, "", "-n", "e2e-restart", "get", "deployment", "app", "-o", "jsonpath={.metadata.generation}")
	if n, _ := strconv.Atoi(gen); n < 3 {
		t.Errorf("deployment generation %s: the pod template did not change twice", gen)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "config-restarter")
}

// TestInvalidControllerIsReported: a controller with a bad pipeline is
// Ready=False with the spec path in its status; its sibling controller and
// other operators keep running.
func TestInvalidControllerIsReported(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-invalid")
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: half-broken
spec:
  controllers:
    - name: broken
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-invalid}]
      pipeline:
        - "@select": true
        - "@frobnicate": {}
      target: {kind: Nothing}
    - name: works
      sources: [{apiGroup: "", kind: ConfigMap, namespace: e2e-invalid}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {keys: {"@len": {"@definedOr": ["$.data", {}]}}}
      target: {kind: KeyCount}
`, "apply", "-f", "-")
	re := regexp.MustCompile(`broken False InvalidSpec spec\.controllers\[0\]\.pipeline\[1\]: unknown pipeline stage "@frobnicate"`)
	eventually(t, 20*time.Second, func() string {
		out, err := kubectl(t, "", "get", "operators.dcontroller.io", "half-broken", "-o",
			`jsonpath={range .status.controllers[*]}{.name} {.conditions[0].status} {.conditions[0].reason} {.conditions[0].message}{"\n"}{end}`)
		if err != nil || !re.MatchString(out) || !strings.Contains(out, "works True Ready") {
			return fmt.Sprintf("status:\n%s(err %v)", out, err)
		}
		return ""
	})
	eventually(t, 20*time.Second, func() string {
		out, err := kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=half-broken",
			"-o", `jsonpath={range .items[*]}{.type} {.reason} {.note}{.message}{"\n"}{end}`)
		if err != nil || !strings.Contains(out, "Warning InvalidController controller broken: spec.controllers[0].pipeline[1]") ||
			!strings.Contains(out, "Normal Started operator started with 1 of 2 controllers running") {
			return fmt.Sprintf("events:\n%s(err %v)", out, err)
		}
		return ""
	})
	out, err := runDctl(t, "status", "half-broken")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`half-broken\s+broken\s+False\s+InvalidSpec .*unknown pipeline stage`).MatchString(out) ||
		!regexp.MustCompile(`half-broken\s+works\s+True\s+Ready`).MatchString(out) {
		t.Errorf("dctl status:\n%s", out)
	}
	if _, err := runDctl(t, "status", "no-such-operator"); err == nil || !strings.Contains(err.Error(), "operator(s) not found: no-such-operator") {
		t.Errorf("dctl status of a missing operator: %v", err)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "half-broken")
	eventually(t, 20*time.Second, func() string {
		out, err := kubectl(t, "", "get", "events", "-n", "default", "--field-selector", "involvedObject.name=half-broken,reason=Stopped",
			"-o", `jsonpath={range .items[*]}{.note}{.message}{"\n"}{end}`)
		if err != nil || !strings.Contains(out, "operator deleted: controllers stopped, views dropped") {
			return fmt.Sprintf("Stopped event: %q (err %v)", out, err)
		}
		return ""
	})
}

// TestViewKindResourceNameClash: a controller naming two view kinds that the
// view API server would serve as one resource (Endpoint and Endpoints ->
// endpoints) is Ready=False InvalidSpec with the spec path and both kinds in
// its status and in dctl status, not Ready=True with the kind left unserved.
func TestViewKindResourceNameClash(t *testing.T) {
	startManager(t)
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: plural-clash
spec:
  controllers:
    - name: clash
      sources: [{kind: Endpoint}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
      target: {kind: Endpoints}
`, "apply", "-f", "-")
	const want = `False InvalidSpec spec.controllers[0].target.kind: view kind "Endpoints" has the same resource name "endpoints" as "Endpoint" (spec.controllers[0].sources[0].kind); the view API server cannot serve both`
	eventually(t, 20*time.Second, func() string {
		if out, err := controllerReady(t, "plural-clash"); err != nil || out != want {
			return fmt.Sprintf("plural-clash Ready %q (err %v)", out, err)
		}
		return ""
	})
	out, err := runDctl(t, "status", "plural-clash")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`plural-clash\s+clash\s+False\s+InvalidSpec .*view kind "Endpoints" has the same resource name "endpoints"`).MatchString(out) {
		t.Errorf("dctl status:\n%s", out)
	}
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "plural-clash")
}

// TestPeriodicRepairsDrift: a Periodic source recomputes the target state
// and repairs drift: a changed target is fixed and a deleted one recreated.
func TestPeriodicRepairsDrift(t *testing.T) {
	startManager(t)
	mustKubectl(t, "", "create", "namespace", "e2e-periodic")
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: mirror
spec:
  controllers:
    - name: mirror
      sources:
        - apiGroup: ""
          kind: Secret
          namespace: e2e-periodic
        - kind: Resync
          type: Periodic
          parameters: {period: 1s}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-keys"]}
            namespace: "$.metadata.namespace"
          data:
            keys: {"@join": [{"@sortBy": ["$$", {"@map": ["$$.key", {"@cel": "self.data.map(k, {'key': k})"}]}]}, ","]}
      target: {apiGroup: "", kind: ConfigMap}
`, "apply", "-f", "-")
	mustKubectl(t, "", "-n", "e2e-periodic", "create", "secret", "generic", "db", "--from-literal=user=u", "--from-literal=password=p")
	keys := func() (string, error) {
		return kubectl(t, "", "-n", "e2e-periodic", "get", "configmap", "db-keys", "-o", "jsonpath={.data.keys}")
	}
	eventually(t, 20*time.Second, func() string {
		if got, err := keys(); err != nil || got != "password,user" {
			return fmt.Sprintf("keys %q (err %v)", got, err)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-periodic", "patch", "configmap", "db-keys", "--type=merge", "-p", `{"data":{"keys":"tampered"}}`)
	eventually(t, 20*time.Second, func() string {
		if got, err := keys(); err != nil || got != "password,user" {
			return fmt.Sprintf("drift not repaired: %q (err %v)", got, err)
		}
		return ""
	})
	mustKubectl(t, "", "-n", "e2e-periodic", "delete", "configmap", "db-keys")
	eventually(t, 20*time.Second, func() string {
		if got, err := keys(); err != nil || got != "password,user" {
			return fmt.Sprintf("deleted target not recreated: %q (err %v)", got, err)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "mirror")
}

// TestKindInstalledLater: a controller whose source kind is not served yet
// is reported as KindNotFound and starts by itself once the CRD appears,
// whether the source names the kind's version or leaves it to discovery.
func TestKindInstalledLater(t *testing.T) {
	startManager(t)
	for _, version := range []string{"", "v1"} {
		t.Run("version="+version, func(t *testing.T) { testKindInstalledLater(t, version) })
	}
}

func testKindInstalledLater(t *testing.T, version string) {
	source := "{apiGroup: e2e.example.com, kind: Widget}"
	if version != "" {
		source = "{apiGroup: e2e.example.com, version: " + version + ", kind: Widget}"
	}
	mustKubectl(t, `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: widget-watcher
spec:
  controllers:
    - name: widgets
      sources: [`+source+`]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          spec: {size: "$.spec.size"}
      target: {kind: WidgetView}
`, "apply", "-f", "-")
	status := func() (string, error) {
		return kubectl(t, "", "get", "operators.dcontroller.io", "widget-watcher", "-o",
			`jsonpath={.status.controllers[0].conditions[0].status} {.status.controllers[0].conditions[0].reason}`)
	}
	eventually(t, 20*time.Second, func() string {
		if out, err := status(); err != nil || out != "False KindNotFound" {
			msg, _ := kubectl(t, "", "get", "operators.dcontroller.io", "widget-watcher", "-o", `jsonpath={.status.controllers[0].conditions[0].message}`)
			return fmt.Sprintf("status %q (err %v): %s", out, err, msg)
		}
		return ""
	})
	mustKubectl(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.example.com
spec:
  group: e2e.example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for", "condition=established", "--timeout=30s", "crd/widgets.e2e.example.com")
	eventually(t, 60*time.Second, func() string {
		if out, err := status(); err != nil || out != "True Ready" {
			return fmt.Sprintf("status %q (err %v)", out, err)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "operators.dcontroller.io", "widget-watcher")
	mustKubectl(t, "", "delete", "crd", "widgets.e2e.example.com")
	mustKubectl(t, "", "wait", "--for=delete", "--timeout=60s", "crd/widgets.e2e.example.com")
}
