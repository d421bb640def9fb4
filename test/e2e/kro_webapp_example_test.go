package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

// TestExampleKroWebApp runs examples/kro-webapp live with dctl start: the
// RGD is accepted and its kind served; a WebApplication gets its
// Deployment at once, its Service and Ingress once the Deployment is
// available (readyWhen; no kubelet runs, so the test marks the Pods
// ready), and a status from both; turning the Ingress off prunes it;
// deleting the instance deletes its resources, and deleting the RGD its
// CRD.
func TestExampleKroWebApp(t *testing.T) {
	const ns, crdName = "e2e-kro-webapp", "webapplications.kro.run"
	startDctl(t, t.TempDir(), "start", "--health-addr", "0", "--metrics-addr", "0")
	cleanupRGD(t, "webapplication", crdName)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, exampleFile(t, "kro-webapp", "operator.yaml", ns), "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		g, err := getRGD(t, "webapplication")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, "True") {
			return "Ready " + c
		}
		return ""
	})
	// The first object of input.yaml is the WebApplication "store"; its
	// uid is for dctl eval, the API server gives its own.
	docs := strings.Split(exampleFile(t, "kro-webapp", "input.yaml", ns), "\n---\n")
	mustKubectl(t, regexp.MustCompile(`, uid: [^}]*`).ReplaceAllString(docs[0], ""), "apply", "-f", "-")
	f := &rgdFixture{t: t, ns: ns}

	f.want("deployment", "store", "{.spec.replicas} {.spec.template.spec.containers[0].image} {.metadata.ownerReferences[0].kind}", "2 nginx:1.27 WebApplication")
	f.want("webapplications", "store", "{.status.state}", "IN_PROGRESS")
	if got := f.names("services,ingresses", "store"); got != "" {
		t.Fatalf("before the Deployment is available: %q", got)
	}

	eventually(t, 60*time.Second, func() string {
		out, err := kubectl(t, "", "-n", ns, "get", "pods", "-l", "app=store", "-o", "name")
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
	f.want("service", "store", "{.spec.selector.app} {.spec.ports[0].targetPort}", "store 8080")
	f.want("ingress", "store", "{.spec.rules[0].host} {.spec.rules[0].http.paths[0].backend.service.name}", "store.example.com store")
	f.want("webapplications", "store", `{.status.availableReplicas} {.status.service} {.status.state} {.status.conditions[?(@.type=="Ready")].status}`,
		"2 store."+ns+".svc ACTIVE True")

	mustKubectl(t, "", "-n", ns, "patch", "webapplications", "store", "--type=merge", "-p", `{"spec":{"ingress":{"enabled":false}}}`)
	eventually(t, 60*time.Second, func() string {
		if got := f.names("ingresses", "store"); got != "" {
			return "ingress left after it was turned off: " + got
		}
		return ""
	})
	f.want("service", "store", "{.metadata.name}", "store")

	mustKubectl(t, "", "-n", ns, "delete", "webapplications", "store")
	eventually(t, 60*time.Second, func() string {
		if got := f.names("deployments,services,ingresses", "store"); got != "" {
			return "left after the instance was deleted: " + got
		}
		return ""
	})
	mustKubectl(t, "", "delete", "rgd", "webapplication", "--timeout=30s")
	eventually(t, 30*time.Second, func() string {
		if _, err := getCRD(crdName); err == nil {
			return "CRD after the RGD was deleted"
		}
		return ""
	})
}
