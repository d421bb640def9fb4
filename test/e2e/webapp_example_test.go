package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestExampleWebApp runs examples/webapp live: one WebApp gives a Deployment
// and a Service; the Deployment's status (from kube-controller-manager's
// ReplicaSet, once its Pods are ready) shows in the WebApp's status through
// the status subresource; a replica count set by someone else (kubectl
// scale) stays, an image set by someone else is restored; deleting the
// WebApp removes both.
func TestExampleWebApp(t *testing.T) {
	startManager(t)
	const ns = "e2e-webapp"
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, exampleFile(t, "webapp", "crd.yaml", ns), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/webapps.example.io")
	mustKubectl(t, exampleFile(t, "webapp", "operator.yaml", ns), "apply", "-f", "-")
	// The first object of input.yaml is the WebApp "store"; the others are
	// for dctl eval (a second WebApp, and a Deployment the cluster makes).
	docs := strings.Split(exampleFile(t, "webapp", "input.yaml", ns), "\n---\n")
	mustKubectl(t, docs[0], "apply", "-f", "-")

	get := func(kind, name, jsonpath string) string {
		out, err := kubectl(t, "", "-n", ns, "get", kind, name, "-o", "jsonpath="+jsonpath)
		if err != nil {
			return "error: " + err.Error()
		}
		return out
	}
	want := func(timeout time.Duration, kind, name, jsonpath, value string) {
		t.Helper()
		eventually(t, timeout, func() string {
			if got := get(kind, name, jsonpath); got != value {
				return fmt.Sprintf("%s %s %s = %q, want %q", kind, name, jsonpath, got, value)
			}
			return ""
		})
	}

	// The Deployment and the Service, and a status from the left join's
	// unmatched row or from the Deployment kube-controller-manager starts.
	want(30*time.Second, "deployment", "store", "{.spec.template.spec.containers[0].image}", "nginx:1.27")
	want(30*time.Second, "deployment", "store", "{.spec.replicas}", "2")
	want(30*time.Second, "service", "store", "{.spec.ports[0].targetPort}", "8080")
	want(30*time.Second, "webapp", "store", "{.status.service}", "store."+ns+".svc")
	want(60*time.Second, "webapp", "store", "{.status.phase} {.status.ready}", "Pending 0/2")

	// No kubelet runs: mark the ReplicaSet's Pods ready, and the WebApp's
	// status follows the Deployment's.
	eventually(t, 60*time.Second, func() string {
		out, err := kubectl(t, "", "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=store", "-o", "name")
		if err != nil {
			return err.Error()
		}
		pods := strings.Fields(out)
		if len(pods) != 2 {
			return fmt.Sprintf("pods of store: %v, want 2", pods)
		}
		for _, p := range pods {
			setPodReady(t, ns, strings.TrimPrefix(p, "pod/"), "True")
		}
		return ""
	})
	want(60*time.Second, "webapp", "store", "{.status.phase} {.status.ready} {.status.readyReplicas}", "Ready 2/2 2")
	if got := get("webapp", "store", "{.spec.image}"); got != "nginx:1.27" {
		t.Errorf("the WebApp's spec changed: image %q", got)
	}

	// Replicas are handed off once another field manager sets them: the
	// scale stays, the controller stays Ready.
	mustKubectl(t, "", "-n", ns, "scale", "deployment", "store", "--replicas=3")
	want(30*time.Second, "webapp", "store", "{.status.ready}", "2/3")
	time.Sleep(3 * time.Second)
	if got := get("deployment", "store", "{.spec.replicas}"); got != "3" {
		t.Errorf("after kubectl scale: replicas %q, want 3 (handed off)", got)
	}
	want(10*time.Second, "operator", "webapp", `{.status.controllers[0].conditions[?(@.type=="Ready")].status}`, "True")

	// The image is not handed off: another writer's change is restored.
	mustKubectl(t, "", "-n", ns, "set", "image", "deployment/store", "web=nginx:1.28")
	want(30*time.Second, "deployment", "store", "{.spec.template.spec.containers[0].image}", "nginx:1.27")

	// A change of the WebApp reaches the Deployment.
	mustKubectl(t, "", "-n", ns, "patch", "webapp", "store", "--type=merge", "-p", `{"spec":{"image":"nginx:1.29"}}`)
	want(30*time.Second, "deployment", "store", "{.spec.template.spec.containers[0].image}", "nginx:1.29")

	// Deleting the WebApp removes both.
	mustKubectl(t, "", "-n", ns, "delete", "webapp", "store", "--wait=true")
	eventually(t, 30*time.Second, func() string {
		out, err := kubectl(t, "", "-n", ns, "get", "deployments,services", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "" {
			return fmt.Sprintf("left after deleting the WebApp: %q (err %v)", out, err)
		}
		return ""
	})
}
