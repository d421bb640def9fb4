package rgd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

// pendingRun runs one RGD of testdata/compile offline, as dctl eval does.
type pendingRun struct {
	t    *testing.T
	off  *operator.Offline
	inst schema.GroupVersionKind
}

func newPendingRun(t *testing.T, file, kind string) *pendingRun {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "compile", file+".rgd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(decodeRGD(t, string(src)))
	if err != nil {
		t.Fatal(err)
	}
	off, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{
		Versions:          map[string]string{"kro.run/" + kind: "v1alpha1"},
		StatusSubresource: operator.InputStatusSubresource(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &pendingRun{t: t, off: off, inst: schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: kind}}
}

// instance applies the instance ns/i1 with spec (its status kept, as the
// status subresource keeps it).
func (r *pendingRun) instance(spec map[string]any, deleting bool) {
	r.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(r.inst)
	u.SetNamespace("ns")
	u.SetName("i1")
	u.SetUID("uid-i1")
	if old := r.get(r.inst, "i1"); old != nil {
		u.Object["status"] = old.Object["status"]
		u.SetAnnotations(old.GetAnnotations())
	}
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{InstanceFinalizer})
	}
	r.apply(u)
}

func (r *pendingRun) apply(u *unstructured.Unstructured) {
	r.t.Helper()
	if err := r.off.Apply(context.Background(), u); err != nil {
		r.t.Fatal(err)
	}
}

// get returns the object ns/name of gvk, nil when there is none.
func (r *pendingRun) get(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	r.t.Helper()
	u, err := r.off.Store.Get(gvk, object.Key{Namespace: "ns", Name: name})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

// setStatus sets the status of an existing object, as its controller would.
func (r *pendingRun) setStatus(gvk schema.GroupVersionKind, name string, status map[string]any) {
	r.t.Helper()
	u := r.get(gvk, name)
	if u == nil {
		r.t.Fatalf("%s ns/%s does not exist", gvk.Kind, name)
	}
	u = u.DeepCopy()
	u.Object["status"] = status
	r.apply(u)
}

// state returns the instance's status.state and its ResourcesReady message.
func (r *pendingRun) state() (string, string) {
	r.t.Helper()
	u := r.get(r.inst, "i1")
	st, _ := u.Object["status"].(map[string]any)
	s, _ := st["state"].(string)
	msg, _ := condition(st, "ResourcesReady")["message"].(string)
	return s, msg
}

// expectState fails unless the instance is in state, its ResourcesReady
// message naming each of waiting.
func (r *pendingRun) expectState(when, state string, waiting ...string) {
	r.t.Helper()
	s, msg := r.state()
	if s != state {
		r.t.Fatalf("%s: state %q (%s), want %s", when, s, msg, state)
	}
	for _, w := range waiting {
		if !strings.Contains(msg, w) {
			r.t.Fatalf("%s: ResourcesReady message %q does not name %s", when, msg, w)
		}
	}
}

// unchanged fails unless u is still there with the same resourceVersion.
func (r *pendingRun) unchanged(when string, u *unstructured.Unstructured) {
	r.t.Helper()
	now := r.get(u.GroupVersionKind(), u.GetName())
	if now == nil {
		r.t.Fatalf("%s: %s %s was deleted; a pending resource keeps its object", when, u.GetKind(), u.GetName())
	}
	if now.GetResourceVersion() != u.GetResourceVersion() {
		r.t.Fatalf("%s: %s %s was written (resourceVersion %s -> %s); a pending resource keeps its object as it is",
			when, u.GetKind(), u.GetName(), u.GetResourceVersion(), now.GetResourceVersion())
	}
	if _, ok := now.GetAnnotations()[opv1a1.KeepAnnotation]; ok {
		r.t.Fatalf("%s: the keep marker was written on %s", when, u.GetName())
	}
}

var (
	ingressGVK = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	secretGVK  = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
)

// TestPendingReadinessKeepsDependent: a Service whose Deployment stops
// being ready (its readyWhen false, as during a scale-up) is left as it is,
// not deleted, and the instance is IN_PROGRESS naming both; when the
// Deployment is ready again the Service is the same object. A Service
// that does not exist yet is not created while its Deployment is not
// ready.
func TestPendingReadinessKeepsDependent(t *testing.T) {
	r := newPendingRun(t, "webapp-status", "WebApp")
	spec := map[string]any{"name": "web", "image": "nginx", "port": int64(8080), "replicas": int64(2)}
	r.instance(spec, false)
	if r.get(deploymentGVK, "web") == nil {
		t.Fatal("no Deployment")
	}
	if r.get(serviceGVK, "web-svc") != nil {
		t.Fatal("a Service before the Deployment is ready")
	}
	r.expectState("Deployment not ready", "IN_PROGRESS", "deployment")
	r.setStatus(deploymentGVK, "web", map[string]any{"availableReplicas": int64(2)})
	svc := r.get(serviceGVK, "web-svc")
	if svc == nil {
		t.Fatal("no Service once the Deployment is ready")
	}
	r.expectState("all ready", "ACTIVE")
	// Scale up: the Deployment is not ready until the new replica is.
	spec["replicas"] = int64(3)
	r.instance(spec, false)
	r.unchanged("scaling up", svc)
	r.expectState("scaling up", "IN_PROGRESS", "deployment", "service")
	r.setStatus(deploymentGVK, "web", map[string]any{})
	r.unchanged("no replica available", svc)
	r.setStatus(deploymentGVK, "web", map[string]any{"availableReplicas": int64(3)})
	r.unchanged("ready again", svc)
	r.expectState("ready again", "ACTIVE")
	// The instance goes: so do its resources.
	r.instance(spec, true)
	if r.get(serviceGVK, "web-svc") != nil || r.get(deploymentGVK, "web") != nil {
		t.Fatal("the resources of a deleted instance remain")
	}
}

// TestPendingIncludeWhen: an includeWhen that evaluates to false deletes
// the resource; one that cannot be evaluated (the field it reads is not
// there) keeps it, and the instance is IN_PROGRESS.
func TestPendingIncludeWhen(t *testing.T) {
	r := newPendingRun(t, "ingress", "Site")
	r.instance(map[string]any{"name": "s", "ingress": map[string]any{"enabled": true}}, false)
	ing := r.get(ingressGVK, "s")
	if ing == nil {
		t.Fatal("no Ingress")
	}
	r.expectState("enabled", "ACTIVE")
	r.instance(map[string]any{"name": "s"}, false)
	r.unchanged("includeWhen unresolved", ing)
	r.expectState("includeWhen unresolved", "IN_PROGRESS", "ingress")
	r.instance(map[string]any{"name": "s", "ingress": map[string]any{"enabled": false}}, false)
	if r.get(ingressGVK, "s") != nil {
		t.Fatal("includeWhen false: the Ingress remains")
	}
	r.expectState("disabled", "ACTIVE")
	// Not there and unresolved: not created.
	r.instance(map[string]any{"name": "s"}, false)
	if r.get(ingressGVK, "s") != nil {
		t.Fatal("includeWhen unresolved: an Ingress was created")
	}
}

// TestPendingExternalRefGone: deleting the object an externalRef names
// leaves the resources reading it as they are, and the instance
// IN_PROGRESS; when it is back, they are written again.
func TestPendingExternalRefGone(t *testing.T) {
	r := newPendingRun(t, "external", "ConfiguredApp")
	cm := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"logLevel": "debug"}}}
	cm.SetGroupVersionKind(configMapGVK)
	cm.SetNamespace("ns")
	cm.SetName("platform-config")
	r.apply(cm)
	r.instance(map[string]any{"name": "app", "configName": "platform-config"}, false)
	app := r.get(deploymentGVK, "app")
	if app == nil {
		t.Fatal("no Deployment")
	}
	r.expectState("external there", "ACTIVE")
	if err := r.off.Delete(context.Background(), configMapGVK, object.Key{Namespace: "ns", Name: "platform-config"}); err != nil {
		t.Fatal(err)
	}
	r.unchanged("externalRef deleted", app)
	r.expectState("externalRef deleted", "IN_PROGRESS", "platform", "app")
	cm.Object["data"] = map[string]any{"logLevel": "info"}
	r.apply(cm)
	app = r.get(deploymentGVK, "app")
	env, _, _ := unstructured.NestedSlice(app.Object, "spec", "template", "spec", "containers")
	if b, _ := json.Marshal(env); !strings.Contains(string(b), `"info"`) {
		t.Fatalf("externalRef back: Deployment not rewritten: %s", b)
	}
	r.expectState("external back", "ACTIVE")
}

// TestPendingCollection: a collection whose forEach cannot be resolved (a
// field removed from the instance) keeps its items and the resource
// reading it, and the instance is IN_PROGRESS, not ACTIVE; resolved again
// with fewer items, the extra item is deleted.
func TestPendingCollection(t *testing.T) {
	r := newPendingRun(t, "collection", "Fleet")
	r.instance(map[string]any{"regions": []any{"eu"}, "tiers": []any{"web", "db"}}, false)
	web, db, sum := r.get(configMapGVK, "i1-eu-web"), r.get(configMapGVK, "i1-eu-db"), r.get(secretGVK, "i1-summary")
	if web == nil || db == nil || sum == nil {
		t.Fatalf("items %v %v, summary %v", web != nil, db != nil, sum != nil)
	}
	r.expectState("created", "ACTIVE")
	r.instance(map[string]any{"regions": []any{"eu"}}, false)
	r.unchanged("forEach unresolved", web)
	r.unchanged("forEach unresolved", db)
	r.unchanged("forEach unresolved", sum)
	r.expectState("forEach unresolved", "IN_PROGRESS", "configs")
	r.instance(map[string]any{"regions": []any{"eu"}, "tiers": []any{"web"}}, false)
	if r.get(configMapGVK, "i1-eu-db") != nil {
		t.Fatal("resolved with one item: the other remains")
	}
	if r.get(configMapGVK, "i1-eu-web") == nil { // its collection-size label changes
		t.Fatal("resolved again: the item left is gone")
	}
	r.expectState("resolved again", "ACTIVE")
	// An empty forEach is complete: no items, ACTIVE.
	r.instance(map[string]any{"regions": []any{}, "tiers": []any{"web"}}, false)
	if r.get(configMapGVK, "i1-eu-web") != nil {
		t.Fatal("empty forEach: an item remains")
	}
	r.expectState("empty", "ACTIVE")
}
