package e2e

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exampleFile reads examples/<dir>/<name>, with the namespace "shop" of the
// example's inputs renamed to ns so that tests do not share objects.
func exampleFile(t *testing.T, dir, name, ns string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "examples", dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "namespace: shop", "namespace: "+ns)
}

// setPodReady writes the Ready condition of a Pod through its status
// subresource (no kubelet runs in the test cluster).
func setPodReady(t *testing.T, ns, name, status string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":%q}]}}`, status)
	mustKubectl(t, "", "-n", ns, "patch", "pod", name, "--subresource=status", "--type=merge", "-p", patch)
}

// TestExampleServiceReadyPods runs examples/service-ready-pods live: the
// ready count of each Service's Pods, read from the Pods' Ready condition
// through a JSONPath filter query, follows the Pods' status changes and
// deletions.
func TestExampleServiceReadyPods(t *testing.T) {
	startManager(t)
	const ns = "e2e-ready-pods"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, exampleFile(t, "service-ready-pods", "operator.yaml", ns), "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "service-ready-pods")
	// The API server drops the status of created Pods: set it afterwards.
	mustKubectl(t, exampleFile(t, "service-ready-pods", "input.yaml", ns), "apply", "-f", "-")
	setPodReady(t, ns, "web-1", "True")
	setPodReady(t, ns, "web-2", "False")
	setPodReady(t, ns, "web-debug", "True")
	setPodReady(t, ns, "db-0", "True")

	readyPods := func(svc, want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			got, err := kubectl(t, "", "-n", ns, "get", "service", svc, "-o", `jsonpath={.metadata.annotations.example\.io/ready-pods}`)
			if err != nil || got != want {
				return fmt.Sprintf("service %s: ready-pods %q (err %v), want %q", svc, got, err, want)
			}
			return ""
		})
	}
	readyPods("web", "1/3")
	readyPods("db", "1/1")

	setPodReady(t, ns, "web-2", "True")
	readyPods("web", "2/3")
	mustKubectl(t, "", "-n", ns, "delete", "pod", "web-3", "--wait=true")
	readyPods("web", "2/2")
	setPodReady(t, ns, "db-0", "False")
	readyPods("db", "0/1")
}

// TestExampleConfigMapRestarter runs examples/configmap-restarter live: the
// Pod template of the Deployment that names the ConfigMap carries the hash
// of the ConfigMap's data that dctl eval computes, before and after the data
// changes; the other Deployment is left alone.
func TestExampleConfigMapRestarter(t *testing.T) {
	startManager(t)
	const ns = "e2e-restarter"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, exampleFile(t, "configmap-restarter", "operator.yaml", ns), "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "configmap-restarter")
	// input.yaml holds the ConfigMap twice (before and after a change):
	// apply the first version and the Deployments first.
	docs := strings.Split(exampleFile(t, "configmap-restarter", "input.yaml", ns), "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("examples/configmap-restarter/input.yaml holds %d objects, want 4", len(docs))
	}
	mustKubectl(t, strings.Join(docs[:3], "\n---\n"), "apply", "-f", "-")

	// The hashes dctl eval computes for the two versions of the data
	// (examples/configmap-restarter/expected.yaml holds the second).
	hash := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			got, err := kubectl(t, "", "-n", ns, "get", "deployment", "web", "-o", `jsonpath={.spec.template.metadata.annotations.example\.io/config-hash}`)
			if err != nil || got != want {
				return fmt.Sprintf("deployment web: config-hash %q (err %v), want %q", got, err, want)
			}
			return ""
		})
	}
	hash("dnlynp")
	mustKubectl(t, docs[3], "apply", "-f", "-")
	hash("45ai56")
	if got := mustKubectl(t, "", "-n", ns, "get", "deployment", "db", "-o", `jsonpath={.spec.template.metadata.annotations}`); got != "" {
		t.Errorf("deployment db got template annotations %s", got)
	}
}

const secretOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: secret-login
spec:
  controllers:
    # A Secret's decoded data, read as text.
    - name: login-configmap
      sources:
        - apiGroup: ""
          kind: Secret
          namespace: e2e-secrets
          labelSelector: {matchLabels: {role: db}}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-login"]}
            namespace: "$.metadata.namespace"
          data:
            login: {"@concat": ["$.data.username", "@", "$.data.host"]}
      target: {apiGroup: "", kind: ConfigMap}
    # A Secret written through stringData.
    - name: url-secret
      sources:
        - apiGroup: ""
          kind: Secret
          namespace: e2e-secrets
          labelSelector: {matchLabels: {role: db}}
      pipeline:
        "@project":
          metadata:
            name: {"@concat": ["$.metadata.name", "-url"]}
            namespace: "$.metadata.namespace"
          type: Opaque
          stringData:
            url: {"@concat": ["postgres://", "$.data.username", "@", "$.data.host"]}
      target: {apiGroup: "", kind: Secret}
`

// TestSecretSourceDecoded: a pipeline reads a Secret source's data decoded
// (as Δ-controller does), and writes a Secret through stringData, which the
// API server encodes.
func TestSecretSourceDecoded(t *testing.T) {
	startManager(t)
	const ns = "e2e-secrets"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, secretOperator, "apply", "-f", "-")
	deleteOperatorsAtCleanup(t, "secret-login")
	mustKubectl(t, "", "-n", ns, "create", "secret", "generic", "db", "--from-literal=username=admin", "--from-literal=host=db.shop")
	mustKubectl(t, "", "-n", ns, "label", "secret", "db", "role=db")

	login := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			got, err := kubectl(t, "", "-n", ns, "get", "configmap", "db-login", "-o", "jsonpath={.data.login}")
			if err != nil || got != want {
				return fmt.Sprintf("configmap db-login: login %q (err %v), want %q", got, err, want)
			}
			return ""
		})
	}
	url := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			enc, err := kubectl(t, "", "-n", ns, "get", "secret", "db-url", "-o", "jsonpath={.data.url}")
			if err != nil {
				return err.Error()
			}
			got, err := base64.StdEncoding.DecodeString(enc)
			if err != nil || string(got) != want {
				return fmt.Sprintf("secret db-url: url %q (%q, err %v), want %q", got, enc, err, want)
			}
			return ""
		})
	}
	login("admin@db.shop")
	url("postgres://admin@db.shop")

	// The source Secret itself stays encoded in the cluster.
	if got := mustKubectl(t, "", "-n", ns, "get", "secret", "db", "-o", "jsonpath={.data.username}"); got != base64.StdEncoding.EncodeToString([]byte("admin")) {
		t.Errorf("source secret data.username is %q", got)
	}

	patch := fmt.Sprintf(`{"data":{"username":%q}}`, base64.StdEncoding.EncodeToString([]byte("root")))
	mustKubectl(t, "", "-n", ns, "patch", "secret", "db", "--type=merge", "-p", patch)
	login("root@db.shop")
	url("postgres://root@db.shop")
}
