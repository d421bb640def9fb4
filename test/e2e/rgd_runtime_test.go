package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgdruntime"
)

// startRGDManager runs a manager with the Operator and the RGD reconcilers
// (what dctl start runs with --rgd) until the test ends.
func startRGDManager(t *testing.T) {
	t.Helper()
	log := ctrl.Log.WithName(t.Name())
	mgr, rt, err := operator.NewManager(restConfig, operator.ManagerOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &operator.Reconciler{Client: mgr.GetClient(), Runtime: rt, Logger: log}
	if err := rec.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	rr := &rgdruntime.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Runtime: rt, Logger: log.WithName("rgd")}
	if err := rr.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
		rt.Stop()
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// cleanupRGD deletes an RGD, its finalizer and its CRD when the test ends,
// whatever state the test left them in (registered after the manager, so
// it runs while the manager still does).
func cleanupRGD(t *testing.T, name, crd string) {
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "rgd", name, "--wait=false", "--ignore-not-found")
		_, _ = kubectl(t, "", "patch", "rgd", name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		if crd != "" {
			// The manager still runs: the RGD gone, it removes the
			// instances' finalizer, also while the CRD's deletion
			// deletes them (a conflict it retries).
			if _, err := kubectl(t, "", "delete", "crd", crd, "--ignore-not-found", "--timeout=60s"); err != nil {
				t.Errorf("deleting the CRD %s after its RGD: %v", crd, err)
			}
		}
	})
}

// getRGD reads an RGD from the API server.
func getRGD(t *testing.T, name string) (*krov1a1.ResourceGraphDefinition, error) {
	t.Helper()
	g := &krov1a1.ResourceGraphDefinition{}
	return g, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, g)
}

// rgdCondition returns "<status> <reason>: <message>" of an RGD condition,
// or "" when there is none.
func rgdCondition(g *krov1a1.ResourceGraphDefinition, t krov1a1.ConditionType) string {
	for _, c := range g.Status.Conditions {
		if c.Type == t {
			return fmt.Sprintf("%s %s: %s", c.Status, ptrStr(c.Reason), ptrStr(c.Message))
		}
	}
	return ""
}

func ptrStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// getCRD reads a CRD from the API server.
func getCRD(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	return crd, k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, crd)
}

const runAppRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-run-app}
spec:
  schema:
    apiVersion: v1alpha1
    kind: RunApp
    group: e2e.dcontroller.io
    spec:
      name: string | required=true
      replicas: integer | default=1 minimum=1
    status:
      ready: ${config.data.ready}
  resources:
    - id: other
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${config.metadata.name}-other"}
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name}"}
        data: {replicas: "${string(schema.spec.replicas)}"}
`

// TestRGDRuntimeLifecycle: an RGD gets kro's finalizer and its instance
// CRD (applied with kro's ownership labels, established, with the
// SimpleSchema fields and the status subresource); its status says the
// graph is accepted and the kind ready, with the topological order and
// each resource's dependencies. A spec update updates the CRD. Deleted
// while an instance exists, it keeps the CRD and says why; once the
// instance is deleted the CRD goes and so does the RGD.
func TestRGDRuntimeLifecycle(t *testing.T) {
	const crdName = "runapps.e2e.dcontroller.io"
	startRGDManager(t)
	cleanupRGD(t, "e2e-run-app", crdName)
	mustKubectl(t, "", "create", "namespace", "e2e-rgd-life")
	mustKubectl(t, runAppRGD, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-run-app")
		if err != nil {
			return err.Error()
		}
		if len(g.Finalizers) != 1 || g.Finalizers[0] != rgdruntime.Finalizer {
			return fmt.Sprintf("finalizers %v", g.Finalizers)
		}
		if c := rgdCondition(g, krov1a1.ConditionGraphAccepted); !strings.HasPrefix(c, "True Valid") {
			return "GraphAccepted " + c
		}
		if c := rgdCondition(g, krov1a1.ConditionKindReady); c != "True Ready: kind RunApp has been accepted and is served (CustomResourceDefinition runapps.e2e.dcontroller.io)" {
			return "KindReady " + c
		}
		if c := rgdCondition(g, krov1a1.ConditionControllerReady); c != "True Running: controller is running" {
			return "ControllerReady " + c
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, "True Ready") || g.Status.State != krov1a1.ResourceGraphDefinitionStateActive {
			return fmt.Sprintf("Ready %s, state %s", c, g.Status.State)
		}
		if strings.Join(g.Status.TopologicalOrder, ",") != "config,other" {
			return fmt.Sprintf("topologicalOrder %v", g.Status.TopologicalOrder)
		}
		if r := g.Status.Resources; len(r) != 2 || r[0].ID != "other" || len(r[0].Dependencies) != 1 || r[0].Dependencies[0].ID != "config" || r[1].ID != "config" {
			return fmt.Sprintf("resources %+v", r)
		}
		return ""
	})
	crd, err := getCRD(crdName)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := getRGD(t, "e2e-run-app")
	for k, v := range map[string]string{"kro.run/owned": "true", "kro.run/resource-graph-definition-name": "e2e-run-app",
		"kro.run/resource-graph-definition-id": string(g.UID), "app.kubernetes.io/managed-by": "dcontroller"} {
		if crd.Labels[k] != v {
			t.Errorf("CRD label %s=%q, want %q", k, crd.Labels[k], v)
		}
	}
	v := crd.Spec.Versions[0]
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if v.Name != "v1alpha1" || v.Subresources == nil || v.Subresources.Status == nil || spec.Properties["name"].Type != "string" ||
		spec.Properties["replicas"].Type != "integer" || string(spec.Properties["replicas"].Default.Raw) != "1" || len(spec.Required) != 1 {
		t.Errorf("CRD version %s, subresources %+v, spec schema %+v", v.Name, v.Subresources, spec)
	}
	owners := map[string]bool{}
	for _, mf := range crd.ManagedFields {
		owners[mf.Manager] = true
	}
	if !owners[rgdruntime.FieldManager] {
		t.Errorf("CRD field managers %v, want %s", owners, rgdruntime.FieldManager)
	}
	// The kind is served: an instance gets the CRD's default.
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: RunApp\nmetadata: {name: one, namespace: e2e-rgd-life}\nspec: {name: one}\n", "apply", "-f", "-")
	if got := mustKubectl(t, "", "get", "runapps", "-n", "e2e-rgd-life", "one", "-o", "jsonpath={.spec.replicas}"); got != "1" {
		t.Errorf("instance replicas %q", got)
	}
	// The compiled controllers run: the instance's resources, in order.
	eventually(t, 30*time.Second, func() string {
		got, err := kubectl(t, "", "get", "configmaps", "-n", "e2e-rgd-life", "one", "one-other", "-o", "jsonpath={.items[0].data.replicas} {.items[1].metadata.name}")
		if err != nil || got != "1 one-other" {
			return fmt.Sprintf("resources %q %v", got, err)
		}
		return ""
	})

	// A spec update updates the CRD.
	mustKubectl(t, strings.Replace(runAppRGD, "      replicas:", "      image: string | default=\"nginx\"\n      replicas:", 1), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		crd, err := getCRD(crdName)
		if err != nil {
			return err.Error()
		}
		if img := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["image"]; img.Type != "string" || string(img.Default.Raw) != `"nginx"` {
			return fmt.Sprintf("spec.image %+v", img)
		}
		g, _ := getRGD(t, "e2e-run-app")
		if c := rgdCondition(g, krov1a1.ConditionKindReady); !strings.HasPrefix(c, "True") || g.Status.Conditions[0].ObservedGeneration != g.Generation {
			return fmt.Sprintf("KindReady %s at generation %d of %d", c, g.Status.Conditions[0].ObservedGeneration, g.Generation)
		}
		return ""
	})

	// Deleted with an instance: the CRD stays and the status says why.
	mustKubectl(t, "", "delete", "rgd", "e2e-run-app", "--wait=false")
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-run-app")
		if err != nil {
			return err.Error()
		}
		want := "False Deleting: the ResourceGraphDefinition is being deleted: its CustomResourceDefinition runapps.e2e.dcontroller.io is kept while 1 instance of kind RunApp remain (e2e-rgd-life/one)"
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, want) {
			return "Ready " + c
		}
		return ""
	})
	time.Sleep(2 * rgdruntime.WaitInterval)
	if _, err := getCRD(crdName); err != nil {
		t.Fatalf("the CRD went while an instance remained: %v", err)
	}
	if _, err := getRGD(t, "e2e-run-app"); err != nil {
		t.Fatalf("the RGD went while an instance remained: %v", err)
	}
	// The instance goes (its resources with it, the controllers still
	// running): so do the CRD and the RGD.
	mustKubectl(t, "", "delete", "runapps", "-n", "e2e-rgd-life", "one")
	eventually(t, 30*time.Second, func() string {
		if got, _ := kubectl(t, "", "get", "configmaps", "-n", "e2e-rgd-life", "-l", "kro.run/instance-name=one", "-o", "name"); got != "" {
			return "resources left: " + got
		}
		if _, err := getCRD(crdName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CRD: %v", err)
		}
		if _, err := getRGD(t, "e2e-run-app"); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("RGD: %v", err)
		}
		return ""
	})
}

// TestRGDRuntimeIsolation: an RGD with an error is Ready=False with the
// error's path and gets no CRD; an RGD declaring a kind whose CRD another
// RGD owns is refused with KindReady=False and leaves that CRD alone; the
// RGD beside them is accepted and served. Fixing the bad RGD gets it
// accepted.
func TestRGDRuntimeIsolation(t *testing.T) {
	startRGDManager(t)
	good := strings.NewReplacer("e2e-run-app", "e2e-good", "RunApp", "GoodApp").Replace(runAppRGD)
	bad := strings.NewReplacer("e2e-run-app", "e2e-bad", "RunApp", "BadApp",
		`data: {replicas: "${string(schema.spec.replicas)}"}`, `data: {replicas: "${string(schema.spec.replicas)}"}`+"\n        spec: {replicas: \"${servce.spec.replicas}\"}").Replace(runAppRGD)
	same := strings.NewReplacer("e2e-run-app", "e2e-same", "RunApp", "GoodApp").Replace(runAppRGD)
	if bad == strings.NewReplacer("e2e-run-app", "e2e-bad", "RunApp", "BadApp").Replace(runAppRGD) {
		t.Fatal("the bad RGD is not bad")
	}
	cleanupRGD(t, "e2e-good", "goodapps.e2e.dcontroller.io")
	cleanupRGD(t, "e2e-bad", "badapps.e2e.dcontroller.io")
	cleanupRGD(t, "e2e-same", "")
	mustKubectl(t, good+"---\n"+bad, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		b, err := getRGD(t, "e2e-bad")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(b, krov1a1.ConditionGraphAccepted); c != "False InvalidResourceGraph: spec.resources[1].template.spec.replicas: unknown identifier servce" {
			return "bad GraphAccepted " + c
		}
		if c := rgdCondition(b, krov1a1.ConditionReady); !strings.HasPrefix(c, "False NotReady: GraphAccepted: spec.resources[1].template.spec.replicas: unknown identifier servce") {
			return "bad Ready " + c
		}
		if c := rgdCondition(b, krov1a1.ConditionKindReady); c != "False Waiting: the resource graph is not accepted" || b.Status.State != krov1a1.ResourceGraphDefinitionStateInactive {
			return fmt.Sprintf("bad KindReady %s, state %s", c, b.Status.State)
		}
		g, err := getRGD(t, "e2e-good")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionKindReady); !strings.HasPrefix(c, "True") {
			return "good KindReady " + c
		}
		return ""
	})
	if _, err := getCRD("badapps.e2e.dcontroller.io"); !apierrors.IsNotFound(err) {
		t.Errorf("the bad RGD's CRD: %v", err)
	}

	// Another RGD declaring GoodApp: refused, the CRD stays e2e-good's.
	mustKubectl(t, same, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		s, err := getRGD(t, "e2e-same")
		if err != nil {
			return err.Error()
		}
		want := `False CRDConflict: the CustomResourceDefinition goodapps.e2e.dcontroller.io belongs to the ResourceGraphDefinition "e2e-good" (label kro.run/resource-graph-definition-name); it is left as it is`
		if c := rgdCondition(s, krov1a1.ConditionKindReady); c != want {
			return "same KindReady " + c
		}
		return ""
	})
	crd, err := getCRD("goodapps.e2e.dcontroller.io")
	if err != nil || crd.Labels["kro.run/resource-graph-definition-name"] != "e2e-good" {
		t.Fatalf("the CRD changed hands: %v %v", err, crd.Labels)
	}
	// Deleting the refused RGD leaves the other's CRD.
	mustKubectl(t, "", "delete", "rgd", "e2e-same", "--timeout=30s")
	if _, err := getCRD("goodapps.e2e.dcontroller.io"); err != nil {
		t.Fatalf("deleting e2e-same deleted e2e-good's CRD: %v", err)
	}

	// Fixed, the bad RGD is accepted and served.
	mustKubectl(t, strings.NewReplacer("e2e-run-app", "e2e-bad", "RunApp", "BadApp").Replace(runAppRGD), "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		b, err := getRGD(t, "e2e-bad")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(b, krov1a1.ConditionKindReady); !strings.HasPrefix(c, "True") {
			return "fixed KindReady " + c
		}
		return ""
	})
	for _, n := range []string{"e2e-good", "e2e-bad"} {
		mustKubectl(t, "", "delete", "rgd", n, "--timeout=30s")
	}
	eventually(t, 30*time.Second, func() string {
		for _, n := range []string{"goodapps.e2e.dcontroller.io", "badapps.e2e.dcontroller.io"} {
			if _, err := getCRD(n); !apierrors.IsNotFound(err) {
				return fmt.Sprintf("CRD %s after its RGD was deleted without instances: %v", n, err)
			}
		}
		return ""
	})
}

// TestDctlStartRGDFlag: dctl start --rgd=false leaves RGDs alone (no
// finalizer, no status, no CRD); dctl start without it runs them.
func TestDctlStartRGDFlag(t *testing.T) {
	const crdName = "runapps.e2e.dcontroller.io"
	dir := t.TempDir()
	off := startDctl(t, dir, "start", "--rgd=false", "--health-addr", "0", "--metrics-addr", "0")
	cleanupRGD(t, "e2e-run-app", crdName)
	mustKubectl(t, runAppRGD, "apply", "-f", "-")
	time.Sleep(3 * time.Second)
	g, err := getRGD(t, "e2e-run-app")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Finalizers) != 0 || len(g.Status.Conditions) != 0 {
		t.Errorf("--rgd=false: finalizers %v, conditions %v", g.Finalizers, g.Status.Conditions)
	}
	if _, err := getCRD(crdName); !apierrors.IsNotFound(err) {
		t.Errorf("--rgd=false: CRD %v", err)
	}
	if !strings.Contains(off.logs.String(), "ResourceGraphDefinition support is off (--rgd=false)") {
		t.Errorf("logs:\n%s", off.logs.String())
	}
	off.stop(t)

	on := startDctl(t, dir, "start", "--health-addr", "0", "--metrics-addr", "0")
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-run-app")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionKindReady); !strings.HasPrefix(c, "True") {
			return fmt.Sprintf("KindReady %q\n%s", c, on.logs.String())
		}
		return ""
	})
	mustKubectl(t, "", "delete", "rgd", "e2e-run-app", "--timeout=30s")
	eventually(t, 30*time.Second, func() string {
		if _, err := getCRD(crdName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CRD after the RGD was deleted: %v", err)
		}
		return ""
	})
}

const webServiceRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-web}
spec:
  schema:
    apiVersion: v1alpha1
    kind: WebService
    group: e2e.dcontroller.io
    spec:
      name: string | required=true
      image: string | default="nginx"
      replicas: integer | default=2
      port: integer | default=8080
    status:
      replicas: ${deployment.status.replicas}
      clusterIP: ${service.spec.clusterIP}
  resources:
    - id: deployment
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: "${schema.spec.name}"}
        spec:
          replicas: ${schema.spec.replicas}
          selector: {matchLabels: {app: "${schema.spec.name}"}}
          template:
            metadata: {labels: {app: "${schema.spec.name}"}}
            spec:
              containers:
                - name: web
                  image: ${schema.spec.image}
                  ports: [{containerPort: "${schema.spec.port}"}]
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${deployment.metadata.name}"}
        spec:
          selector: {app: "${schema.spec.name}"}
          ports: [{port: 80, targetPort: "${schema.spec.port}"}]
`

// TestRGDRuntimeWebService: an RGD of a Deployment and a Service run by the
// manager: an instance gets both (kro's labels, an owner reference to the
// instance) and a status from them; an instance update reaches the
// Deployment; deleting the instance deletes them.
func TestRGDRuntimeWebService(t *testing.T) {
	const ns, crdName = "e2e-rgd-web", "webservices.e2e.dcontroller.io"
	startRGDManager(t)
	cleanupRGD(t, "e2e-web", crdName)
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, webServiceRGD, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-web")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, "True") {
			return "Ready " + c
		}
		return ""
	})
	if g, _ := getRGD(t, "e2e-web"); strings.Join(g.Status.TopologicalOrder, ",") != "deployment,service" {
		t.Errorf("topologicalOrder %v", g.Status.TopologicalOrder)
	}
	instance := "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: WebService\nmetadata: {name: front, namespace: " + ns + "}\nspec: {name: front}\n"
	mustKubectl(t, instance, "apply", "-f", "-")
	get := func(kind, name, jsonpath string) string {
		out, err := kubectl(t, "", "-n", ns, "get", kind, name, "-o", "jsonpath="+jsonpath)
		if err != nil {
			return "error: " + err.Error()
		}
		return out
	}
	want := func(kind, name, jsonpath, value string) {
		t.Helper()
		eventually(t, 60*time.Second, func() string {
			if got := get(kind, name, jsonpath); got != value {
				return fmt.Sprintf("%s %s %s = %q, want %q", kind, name, jsonpath, got, value)
			}
			return ""
		})
	}
	uid := get("webservices", "front", "{.metadata.uid}")
	want("deployment", "front", "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}", "2 nginx 8080")
	want("deployment", "front", `{.metadata.labels.kro\.run/instance-name} {.metadata.labels.kro\.run/resource-graph-definition-name} {.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].uid}`,
		"front e2e-web WebService "+uid)
	want("service", "front", "{.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.selector.app}", "80 8080 front")
	clusterIP := get("service", "front", "{.spec.clusterIP}")
	if clusterIP == "" || strings.HasPrefix(clusterIP, "error") {
		t.Fatalf("service clusterIP %q", clusterIP)
	}
	// kube-controller-manager's Deployment controller reports the replicas.
	want("webservices", "front", "{.status.replicas} {.status.clusterIP} {.status.state}", "2 "+clusterIP+" ACTIVE")
	want("webservices", "front", `{.status.conditions[?(@.type=="Ready")].status}`, "True")

	mustKubectl(t, "", "-n", ns, "patch", "webservices", "front", "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	want("deployment", "front", "{.spec.replicas}", "3")
	want("webservices", "front", "{.status.replicas}", "3")

	mustKubectl(t, "", "-n", ns, "delete", "webservices", "front")
	eventually(t, 60*time.Second, func() string {
		out, _ := kubectl(t, "", "-n", ns, "get", "deployments,services", "-o", "name")
		if strings.TrimSpace(out) != "" {
			return "left after the instance was deleted: " + out
		}
		return ""
	})
	mustKubectl(t, "", "delete", "rgd", "e2e-web", "--timeout=30s")
	eventually(t, 30*time.Second, func() string {
		if _, err := getCRD(crdName); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("CRD after the RGD was deleted: %v", err)
		}
		return ""
	})
}

// TestRGDRuntimeTooManyTargets: an RGD with more template resources than
// one controller may have targets (--max-targets, 64 by default, less the
// instance status) is not accepted, and its status says so at once, naming
// spec.resources and the flag, instead of a controller that fails to
// start; no CRD is applied.
func TestRGDRuntimeTooManyTargets(t *testing.T) {
	startRGDManager(t)
	var b strings.Builder
	b.WriteString(`apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-many}
spec:
  schema:
    apiVersion: v1alpha1
    kind: ManyApp
    group: e2e.dcontroller.io
    spec: {name: string}
  resources:
`)
	for i := range 64 {
		fmt.Fprintf(&b, "    - id: cm%d\n      template: {apiVersion: v1, kind: ConfigMap, metadata: {name: \"${schema.metadata.name}-%d\"}}\n", i, i)
	}
	cleanupRGD(t, "e2e-many", "manyapps.e2e.dcontroller.io")
	mustKubectl(t, b.String(), "apply", "-f", "-")
	want := "False InvalidResourceGraph: spec.resources: 64 template resources and the instance status make 65 targets of one controller, more than the manager's limit of 64 (dctl start --max-targets): at most 63 template resources"
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-many")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionGraphAccepted); c != want {
			return "GraphAccepted " + c
		}
		return ""
	})
	if _, err := getCRD("manyapps.e2e.dcontroller.io"); !apierrors.IsNotFound(err) {
		t.Errorf("the CRD of an RGD that cannot run: %v", err)
	}
	mustKubectl(t, "", "delete", "rgd", "e2e-many", "--timeout=30s")
}

// TestRGDRuntimeSchemaDefaults: an RGD update that adds a field with a
// default to the instance schema reaches the existing instances without
// their being edited: the controllers restart so that the instances are
// listed again, with the default the API server now gives them.
func TestRGDRuntimeSchemaDefaults(t *testing.T) {
	startRGDManager(t)
	v1 := `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-grow}
spec:
  schema:
    apiVersion: v1alpha1
    kind: GrowApp
    group: e2e.dcontroller.io
    spec: {name: string}
    status:
      config: ${cm.metadata.name}
  resources:
    - id: cm
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name}"}
`
	v2 := strings.NewReplacer("spec: {name: string}", `spec: {name: string, size: "integer | default=3"}`,
		"      config: ${cm.metadata.name}", "      config: ${cm.metadata.name}\n      size: ${schema.spec.size}",
		`metadata: {name: "${schema.spec.name}"}`, `metadata: {name: "${schema.spec.name}"}`+"\n        data: {size: \"${string(schema.spec.size)}\"}").Replace(v1)
	cleanupRGD(t, "e2e-grow", "growapps.e2e.dcontroller.io")
	mustKubectl(t, v1, "apply", "-f", "-")
	inst := "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: GrowApp\nmetadata: {name: g1, namespace: default}\nspec: {name: grow-one}\n"
	eventually(t, 30*time.Second, func() string {
		if _, err := kubectl(t, inst, "apply", "-f", "-"); err != nil {
			return err.Error()
		}
		out, _ := kubectl(t, "", "get", "growapps.e2e.dcontroller.io", "g1", "-n", "default", "-o", "jsonpath={.status.config}")
		if out != "grow-one" {
			return "status.config " + out
		}
		return ""
	})
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "growapps.e2e.dcontroller.io", "g1", "-n", "default", "--wait=false")
	})
	mustKubectl(t, v2, "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		size, _ := kubectl(t, "", "get", "configmap", "grow-one", "-n", "default", "-o", "jsonpath={.data.size}")
		st, _ := kubectl(t, "", "get", "growapps.e2e.dcontroller.io", "g1", "-n", "default", "-o", "jsonpath={.status.size}")
		if size != "3" || st != "3" {
			return fmt.Sprintf("ConfigMap data.size %q, status.size %q, want the new default 3", size, st)
		}
		return ""
	})
	mustKubectl(t, "", "delete", "growapps.e2e.dcontroller.io", "g1", "-n", "default", "--timeout=30s")
	mustKubectl(t, "", "delete", "rgd", "e2e-grow", "--timeout=30s")
}
