package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

// startManagerAs runs a manager (the same code as `dctl start`: Operators
// and Metacontroller-style controllers) with the given client configuration
// until the test ends.
func startManagerAs(t *testing.T, cfg *rest.Config) {
	t.Helper()
	startManagerFor(t, cfg, operator.ManagerOptions{})
}

// serviceAccountConfig returns a client configuration that authenticates as
// the ServiceAccount with a token from the TokenRequest API.
func serviceAccountConfig(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	token := strings.TrimSpace(mustKubectl(t, "", "-n", ns, "create", "token", name, "--duration=1h"))
	cfg := rest.AnonymousClientConfig(restConfig)
	cfg.BearerToken = token
	return cfg
}

const forbiddenOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: pod-configmaps
spec:
  controllers:
    - name: pod-to-configmap
      sources:
        - apiGroup: ""
          kind: Pod
          namespace: rbac-apps
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
          data:
            containers:
              "@string":
                "@len": "$.spec.containers"
      target:
        apiGroup: ""
        kind: ConfigMap
`

func readyCondition(t *testing.T, op string) (string, error) {
	return kubectl(t, "", "get", "operators.dcontroller.io", op, "-o",
		`jsonpath={.status.controllers[0].conditions[?(@.type=="Ready")].status}|{.status.controllers[0].conditions[?(@.type=="Ready")].reason}|{.status.controllers[0].conditions[?(@.type=="Ready")].message}`)
}

// installScopedRBAC renders the chart's RBAC (ServiceAccount, roles,
// bindings) in rbac.mode=scoped with the values dctl rbac prints for files,
// applies it and returns the ServiceAccount's name.
func installScopedRBAC(t *testing.T, release, ns string, files ...string) string {
	t.Helper()
	args := []string{"rbac", "--kubeconfig", kubeconfig, "-o", "values"}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	values, err := runDctl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "rbac-values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered, err := helm(t, "template", release, "charts/dcontroller", "--namespace", ns,
		"-f", valuesFile, "--set", "leaderElection.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	var rbacObjs []string
	for _, o := range decodeStream(t, rendered) {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			rbacObjs = append(rbacObjs, string(b))
		}
	}
	applyManifests(t, strings.Join(rbacObjs, "---\n"))
	return release
}

// TestScopedRBACMetacontroller runs the inline-pipeline PodService
// CompositeController (examples/metacontroller-podservice-pipeline, moved to
// an API group of its own) under the chart's scoped RBAC computed by dctl
// rbac: the manager's own rules and the controller's parent and children
// rules are enough for it to create the children and write the status.
// Another CompositeController, whose parent kind the manager may not list
// (so its start waits for an informer that never syncs), holds it back
// in no way.
func TestScopedRBACMetacontroller(t *testing.T) {
	const ns = "rbac-mc-system"
	dir := t.TempDir()
	rename := strings.NewReplacer("examples.dcontroller.io", "rbac-e2e.dcontroller.io", "name: podservice-pipeline", "name: podservice-scoped")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot, "examples", "metacontroller-podservice-pipeline", name))
		if err != nil {
			t.Fatal(err)
		}
		return rename.Replace(string(b))
	}
	mustKubectl(t, read("crd.yaml"), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=established", "--timeout=30s", "crd/podservices.rbac-e2e.dcontroller.io")
	controller := filepath.Join(dir, "controller.yaml")
	if err := os.WriteFile(controller, []byte(read("controller.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	sa := installScopedRBAC(t, "dcontroller-mc", ns, controller)
	rules := mustKubectl(t, "", "get", "clusterrole", sa+"-operators", "-o", "jsonpath={range .rules[*]}{.resources[0]}:{.verbs}{\"\\n\"}{end}")
	for _, want := range []string{`pods:["get","list","watch","create","update","patch","delete"]`, `podservices:["get","list","watch","update","patch"]`, `podservices/status:["update"]`} {
		if !strings.Contains(rules, want) {
			t.Errorf("scoped rules lack %s:\n%s", want, rules)
		}
	}

	installCRD(t, "ForbiddenProbe", "forbiddenprobes", "Namespaced")
	mustKubectl(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: forbidden-parents}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: forbiddenprobes}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks: {sync: {webhook: {url: "http://127.0.0.1:1/"}}}
`, "apply", "-f", "-")
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "forbidden-parents", "--ignore-not-found", "--wait=false")
	})
	startManagerAs(t, serviceAccountConfig(t, ns, sa))
	time.Sleep(2 * time.Second) // the forbidden controller's start is under way
	mustKubectl(t, "", "create", "namespace", "rbac-mc")
	mustKubectl(t, read("controller.yaml"), "apply", "-f", "-")
	mustKubectl(t, read("podservice.yaml"), "-n", "rbac-mc", "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		img, err := kubectl(t, "", "-n", "rbac-mc", "get", "pod", "web-pod", "-o", "jsonpath={.spec.containers[0].image}")
		if err != nil || img != "nginx:1.27" {
			return fmt.Sprintf("child pod image %q (err %v)", img, err)
		}
		if _, err := kubectl(t, "", "-n", "rbac-mc", "get", "service", "web-svc"); err != nil {
			return err.Error()
		}
		st, err := kubectl(t, "", "-n", "rbac-mc", "get", "podservices.rbac-e2e.dcontroller.io", "web", "-o", "jsonpath={.status.pods}/{.status.services}")
		if err != nil || st != "1/1" {
			return fmt.Sprintf("parent status %q (err %v)", st, err)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "compositecontrollers.metacontroller.k8s.io", "podservice-scoped")
	mustKubectl(t, "", "-n", "rbac-mc", "delete", "podservices.rbac-e2e.dcontroller.io", "web", "--wait=false")
}

// TestScopedRBAC installs the chart's RBAC in rbac.mode=scoped with the
// values `dctl rbac` prints for the pod annotator, runs a manager as the
// chart's ServiceAccount, and checks that the annotator works while an
// operator needing more is reported as forbidden, naming the verbs and the
// resource; granting what `dctl rbac` prints for it fixes it.
func TestScopedRBAC(t *testing.T) {
	const ns = "rbac-system"
	dir := t.TempDir()
	annotatorFile := filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml")

	// The chart's RBAC with the rules dctl rbac prints for the annotator,
	// with the cluster's API discovery.
	installScopedRBAC(t, "dcontroller-rbac", ns, annotatorFile)
	if rules := mustKubectl(t, "", "get", "clusterrole", "dcontroller-rbac-operators", "-o", "jsonpath={.rules}"); rules != `[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list","watch","patch"]}]` {
		t.Fatalf("scoped ClusterRole rules: %s", rules)
	}
	// The ServiceAccount may do exactly that.
	for verb, want := range map[string]string{"patch": "yes", "get": "yes", "create": "no", "delete": "no", "update": "no"} {
		got, _ := kubectl(t, "", "auth", "can-i", verb, "pods", "--as=system:serviceaccount:"+ns+":dcontroller-rbac", "-n", "default")
		if strings.TrimSpace(got) != want {
			t.Errorf("can-i %s pods: %q, want %q", verb, got, want)
		}
	}

	startManagerAs(t, serviceAccountConfig(t, ns, "dcontroller-rbac"))
	mustKubectl(t, "", "create", "namespace", "rbac-apps")
	op, err := os.ReadFile(annotatorFile)
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, string(op), "apply", "-f", "-")
	mustKubectl(t, podYAML("rbac-pod", "default", 2), "apply", "-f", "-")
	mustKubectl(t, podYAML("rbac-app", "rbac-apps", 3), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		got, err := annotation(t, "default", "rbac-pod")
		if err != nil || got != "2" {
			return fmt.Sprintf("annotation %q (err %v)", got, err)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		if got, err := readyCondition(t, "pod-container-num-annotator"); err != nil || !strings.HasPrefix(got, "True|") {
			return fmt.Sprintf("annotator status %q (err %v)", got, err)
		}
		return ""
	})

	// An operator that writes ConfigMaps, which the scoped RBAC does not grant.
	mustKubectl(t, forbiddenOperator, "apply", "-f", "-")
	var status string
	eventually(t, 30*time.Second, func() string {
		status, err = readyCondition(t, "pod-configmaps")
		if err != nil || !strings.HasPrefix(status, "False|Forbidden|") {
			return fmt.Sprintf("pod-configmaps status %q (err %v)", status, err)
		}
		return ""
	})
	msg := strings.SplitN(status, "|", 3)[2]
	for _, want := range []string{"target", "forbidden", "create", "update", "delete", `"configmaps"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Forbidden message lacks %q: %s", want, msg)
		}
	}
	t.Logf("status message of the forbidden operator: %s", msg)
	// The annotator is not disturbed.
	mustKubectl(t, podYAML("rbac-pod-2", "default", 1), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		got, err := annotation(t, "default", "rbac-pod-2")
		if err != nil || got != "1" {
			return fmt.Sprintf("annotation %q (err %v)", got, err)
		}
		return ""
	})

	// Grant what dctl rbac prints for the second operator, bound to the
	// ServiceAccount, and restart it with a new generation.
	opFile := filepath.Join(dir, "pod-configmaps.yaml")
	if err := os.WriteFile(opFile, []byte(forbiddenOperator), 0o644); err != nil {
		t.Fatal(err)
	}
	grant, err := runDctl(t, "rbac", "-f", opFile, "--kubeconfig", kubeconfig, "--name", "pod-configmaps",
		"--service-account", ns+":dcontroller-rbac")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: ClusterRole\n", "  - configmaps\n", "kind: ClusterRoleBinding\n"} {
		if !strings.Contains(grant, want) {
			t.Errorf("dctl rbac output lacks %q:\n%s", want, grant)
		}
	}
	applyManifests(t, grant)
	mustKubectl(t, strings.Replace(forbiddenOperator, `"@len": "$.spec.containers"`, `"@len": ["$.spec.containers"]`, 1), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if got, err := readyCondition(t, "pod-configmaps"); err != nil || !strings.HasPrefix(got, "True|") {
			return fmt.Sprintf("pod-configmaps status after the grant %q (err %v)", got, err)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		got, err := kubectl(t, "", "-n", "rbac-apps", "get", "configmap", "rbac-app", "-o", "jsonpath={.data.containers}")
		if err != nil || got != "3" {
			return fmt.Sprintf("configmap rbac-apps/rbac-app data.containers %q (err %v)", got, err)
		}
		return ""
	})

	// kubectl get shows the printer columns of the Operator CRD.
	header := strings.Fields(strings.SplitN(mustKubectl(t, "", "get", "operators.dcontroller.io"), "\n", 2)[0])
	if strings.Join(header, " ") != "NAME READY CONTROLLERS AGE" {
		t.Errorf("kubectl get operators columns: %q", header)
	}

	for _, o := range []string{"pod-configmaps", "pod-container-num-annotator"} {
		mustKubectl(t, "", "delete", "operators.dcontroller.io", o)
	}
	mustKubectl(t, "", "delete", "pod", "rbac-pod", "rbac-pod-2", "--wait=false")
	mustKubectl(t, "", "-n", "rbac-apps", "delete", "pod", "rbac-app", "--wait=false")
}
