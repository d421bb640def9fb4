package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgdruntime"
)

// chainRGD is a chain of three resources: a ConfigMap, a Deployment that
// reads it, a Service that reads the Deployment.
const chainRGD = `apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: {name: e2e-chain}
spec:
  schema:
    apiVersion: v1alpha1
    kind: Chain
    group: e2e.dcontroller.io
    spec:
      name: string | required=true
  resources:
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: "${schema.spec.name}-config"}
        data: {greeting: hello}
    - id: deployment
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: "${schema.spec.name}"}
        spec:
          replicas: 1
          selector:
            matchLabels: {app: "${schema.spec.name}"}
          template:
            metadata:
              labels: {app: "${schema.spec.name}"}
            spec:
              containers:
                - name: app
                  image: nginx
                  envFrom:
                    - configMapRef: {name: "${config.metadata.name}"}
    - id: service
      template:
        apiVersion: v1
        kind: Service
        metadata: {name: "${deployment.metadata.name}"}
        spec:
          selector: ${deployment.spec.selector.matchLabels}
          ports:
            - port: 80
`

const holdFinalizer = "e2e.dcontroller.io/hold"

// startStoppableRGDManager is startRGDManager that returns a stop
// function (also run when the test ends), for a manager restart.
func startStoppableRGDManager(t *testing.T) (stop func()) {
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
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// chainSetup applies chainRGD in ns, waits until it is Ready, creates the
// instance c1 and waits for its three resources and for the instance
// finalizer; the Service and the Deployment then get holdFinalizer, so
// that each stays, being deleted, until the test releases it.
func chainSetup(t *testing.T, f *rgdFixture) {
	t.Helper()
	mustKubectl(t, chainRGD, "apply", "-f", "-")
	eventually(t, 60*time.Second, func() string {
		g, err := getRGD(t, "e2e-chain")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.HasPrefix(c, "True") {
			return "Ready " + c
		}
		return ""
	})
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Chain\nmetadata: {name: c1, namespace: "+f.ns+"}\nspec: {name: web}\n", "apply", "-f", "-")
	f.wantNames("configmaps", "c1", "web-config")
	f.wantNames("deployments", "c1", "web")
	f.wantNames("services", "c1", "web")
	f.want("chains", "c1", "{.metadata.finalizers}", `["`+rgdruntime.InstanceFinalizer+`"]`)
	f.want("chains", "c1", "{.status.state}", "ACTIVE")
	for _, kind := range []string{"services", "deployments"} {
		mustKubectl(t, "", "-n", f.ns, "patch", kind, "web", "--type=merge", "-p", `{"metadata":{"finalizers":["`+holdFinalizer+`"]}}`)
	}
}

// newChainFixture runs a manager that stop stops (and the test's end),
// cleans chainRGD up when the test ends, and sets it up with its instance
// c1 in the new namespace ns (chainSetup).
func newChainFixture(t *testing.T, ns string) (f *rgdFixture, stop func()) {
	t.Helper()
	stop = startStoppableRGDManager(t)
	cleanupRGD(t, "e2e-chain", "chains.e2e.dcontroller.io")
	f = &rgdFixture{t: t, ns: ns}
	mustKubectl(t, "", "create", "namespace", ns)
	chainSetup(t, f)
	return f, stop
}

// release removes holdFinalizer from an object.
func (f *rgdFixture) release(kind, name string) {
	f.t.Helper()
	mustKubectl(f.t, "", "-n", f.ns, "patch", kind, name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
}

// deleting reports "deleting" when the object has a deletionTimestamp,
// "live" when it has none, "gone" when it does not exist.
func (f *rgdFixture) deleting(kind, name string) string {
	out, err := kubectl(f.t, "", "-n", f.ns, "get", kind, name, "--ignore-not-found", "-o", "jsonpath={.metadata.name} {.metadata.deletionTimestamp}")
	switch {
	case err != nil:
		return "error: " + err.Error()
	case strings.TrimSpace(out) == "":
		return "gone"
	case strings.TrimSpace(out) == name:
		return "live"
	}
	return "deleting"
}

// wantStates waits until the Service, the Deployment, the ConfigMap and
// the instance are in the given states (see deleting).
func (f *rgdFixture) wantStates(want string) {
	f.t.Helper()
	eventually(f.t, 60*time.Second, func() string {
		if got := f.states(); got != want {
			return "service deployment configmap instance: " + got + ", want " + want
		}
		return ""
	})
}

func (f *rgdFixture) states() string {
	return strings.Join([]string{f.deleting("services", "web"), f.deleting("deployments", "web"),
		f.deleting("configmaps", "web-config"), f.deleting("chains", "c1")}, " ")
}

// keepsStates checks for d that the states stay want.
func (f *rgdFixture) keepsStates(d time.Duration, want string) {
	f.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		if got := f.states(); got != want {
			f.t.Fatalf("service deployment configmap instance: %s, want it to stay %s", got, want)
		}
	}
}

// restartWhileDeleting stops the manager (stop) while the instance c1 is
// being deleted and its Service held, lets the Service go while no
// manager runs, and checks that a new manager goes on where the first one
// was: the Deployment is deleted, then, once released, the ConfigMap and
// the instance go.
func (f *rgdFixture) restartWhileDeleting(stop func()) {
	f.t.Helper()
	f.t.Log("the manager stops; the Service goes while it is down")
	stop()
	f.release("services", "web")
	f.keepsStates(2*time.Second, "gone live live deleting")
	f.t.Log("a new manager goes on with the Deployment, then the ConfigMap and the instance")
	startStoppableRGDManager(f.t)
	f.wantStates("gone deleting live deleting")
	f.release("deployments", "web")
	f.wantStates("gone gone gone gone")
}

// TestRGDDeleteOrder: deleting an instance deletes its resources
// dependents first: the Service (held by its own finalizer) is deleted
// while the Deployment and the ConfigMap stay; once it is gone the
// Deployment is deleted (held too) while the ConfigMap stays; once that
// is gone the ConfigMap goes, and only then the instance, whose status
// says DELETING and names what it waits for meanwhile.
func TestRGDDeleteOrder(t *testing.T) {
	f, _ := newChainFixture(t, "e2e-rgd-delete")

	t.Log("delete the instance: only the Service, which nothing reads, is deleted")
	mustKubectl(t, "", "-n", f.ns, "delete", "chains", "c1", "--wait=false")
	f.wantStates("deleting live live deleting")
	f.want("chains", "c1", `{.status.state} {.status.conditions[?(@.type=="ResourcesReady")].status} {.status.conditions[?(@.type=="ResourcesReady")].reason}`, "DELETING Unknown UnderDeletion")
	f.want("chains", "c1", `{.status.conditions[?(@.type=="ResourcesReady")].message}`,
		"deleting resources, dependents first; remaining: service (finalizers: "+holdFinalizer+"), deployment (finalizers: "+holdFinalizer+"), config")
	f.keepsStates(3*time.Second, "deleting live live deleting")

	t.Log("the Service goes: the Deployment is deleted, the ConfigMap stays")
	f.release("services", "web")
	f.wantStates("gone deleting live deleting")
	f.keepsStates(3*time.Second, "gone deleting live deleting")

	t.Log("the Deployment goes: the ConfigMap goes, then the instance")
	f.release("deployments", "web")
	f.wantStates("gone gone gone gone")
}

// TestRGDDeleteAcrossRestart: a manager stopped in the middle of an
// instance's deletion picks it up where it was when it starts again; an
// RGD removed without its cleanup (its finalizer taken off by hand)
// releases its instances' finalizer.
func TestRGDDeleteAcrossRestart(t *testing.T) {
	f, stop := newChainFixture(t, "e2e-rgd-delete-restart")
	mustKubectl(t, "", "-n", f.ns, "delete", "chains", "c1", "--wait=false")
	f.wantStates("deleting live live deleting")
	f.restartWhileDeleting(stop)

	t.Log("a second instance; the RGD goes without its cleanup: the instance's finalizer is removed")
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1alpha1\nkind: Chain\nmetadata: {name: c2, namespace: "+f.ns+"}\nspec: {name: two}\n", "apply", "-f", "-")
	f.want("chains", "c2", "{.metadata.finalizers}", `["`+rgdruntime.InstanceFinalizer+`"]`)
	mustKubectl(t, "", "delete", "rgd", "e2e-chain", "--wait=false")
	mustKubectl(t, "", "patch", "rgd", "e2e-chain", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	f.want("chains", "c2", "{.metadata.finalizers}", "")
}

// TestRGDDeletedWithItsCRDAcrossRestart: the RGD and its CRD are deleted
// together while an instance's resources are held; the instance, deleted
// with the CRD, still has its resources deleted dependents first, the RGD
// waits for it (its status says why), and a manager restarted in the
// middle goes on where the first one was; then the CRD and the RGD go.
func TestRGDDeletedWithItsCRDAcrossRestart(t *testing.T) {
	const crd = "chains.e2e.dcontroller.io"
	f, stop := newChainFixture(t, "e2e-rgd-delete-crd")
	mustKubectl(t, "", "delete", "rgd", "e2e-chain", "--wait=false")
	mustKubectl(t, "", "delete", "crd", crd, "--wait=false")
	f.wantStates("deleting live live deleting")
	eventually(t, 30*time.Second, func() string {
		g, err := getRGD(t, "e2e-chain")
		if err != nil {
			return err.Error()
		}
		if c := rgdCondition(g, krov1a1.ConditionReady); !strings.Contains(c, "and its CustomResourceDefinition "+crd+" too, with its 1 instance of kind Chain (e2e-rgd-delete-crd/c1)") {
			return "Ready " + c
		}
		return ""
	})
	f.restartWhileDeleting(stop)
	eventually(t, 60*time.Second, func() string {
		if _, err := getCRD(crd); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the CRD: %v", err)
		}
		if _, err := getRGD(t, "e2e-chain"); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("the RGD: %v", err)
		}
		return ""
	})
}

// TestRGDRemovedWhileManagerDown: an RGD removed without its cleanup (its
// finalizer taken off by hand) while no manager runs: the next manager
// finds it gone by its CRD's label and releases its instances' finalizer.
func TestRGDRemovedWhileManagerDown(t *testing.T) {
	f, stop := newChainFixture(t, "e2e-rgd-removed-down")
	for _, kind := range []string{"services", "deployments"} {
		f.release(kind, "web")
	}
	stop()
	mustKubectl(t, "", "delete", "rgd", "e2e-chain", "--wait=false")
	mustKubectl(t, "", "patch", "rgd", "e2e-chain", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	if _, err := getRGD(t, "e2e-chain"); !apierrors.IsNotFound(err) {
		t.Fatalf("the RGD after its finalizer was removed: %v", err)
	}
	f.want("chains", "c1", "{.metadata.finalizers}", `["`+rgdruntime.InstanceFinalizer+`"]`)

	t.Log("a new manager releases the instance")
	startStoppableRGDManager(t)
	f.want("chains", "c1", "{.metadata.finalizers}", "")
}
