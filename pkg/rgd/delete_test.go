package rgd

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
)

var (
	chainGVK   = schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "Chain"}
	serviceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
)

// chainRun runs testdata/compile/chain.rgd.yaml (ConfigMap <- Deployment
// <- Service) offline, recording the kinds whose desired object a
// resource branch retracts, in order.
type chainRun struct {
	t         *testing.T
	off       *operator.Offline
	mu        sync.Mutex
	retracted []string
}

func newChainRun(t *testing.T) *chainRun {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "compile", "chain.rgd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(decodeRGD(t, string(src)))
	if err != nil {
		t.Fatal(err)
	}
	r := &chainRun{t: t}
	off, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{
		Versions:          map[string]string{"kro.run/Chain": "v1alpha1"},
		StatusSubresource: operator.InputStatusSubresource(nil),
		Trace: func(_, _, stage string, delta *dbsp.ZSet) {
			if !strings.HasSuffix(stage, `["@output"]`) {
				return
			}
			delta.Range(func(doc dbsp.Document, w int) bool {
				// A retraction passes two @output stages (the stream of
				// desired objects, then the target): counted once.
				if k, _ := doc["kind"].(string); w < 0 && k != "" {
					r.mu.Lock()
					if n := len(r.retracted); n == 0 || r.retracted[n-1] != k {
						r.retracted = append(r.retracted, k)
					}
					r.mu.Unlock()
				}
				return true
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.off = off
	return r
}

// instance is the Chain c1 in ns; deleting gives it a deletionTimestamp
// held by the instance finalizer.
func chainInstance(deleting bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"name": "web"}}}
	u.SetGroupVersionKind(chainGVK)
	u.SetNamespace("ns")
	u.SetName("c1")
	u.SetUID("uid-c1")
	if deleting {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{InstanceFinalizer})
	}
	return u
}

func (r *chainRun) apply(u *unstructured.Unstructured) {
	r.t.Helper()
	if err := r.off.Apply(context.Background(), u); err != nil {
		r.t.Fatal(err)
	}
}

// present returns the kinds of the chain's resources in the store.
func (r *chainRun) present() []string {
	var out []string
	for _, gvk := range []schema.GroupVersionKind{configMapGVK, deploymentGVK, serviceGVK} {
		if len(r.off.Store.List(gvk)) > 0 {
			out = append(out, gvk.Kind)
		}
	}
	return out
}

func (r *chainRun) status() map[string]any {
	r.t.Helper()
	u, err := r.off.Store.Get(chainGVK, object.Key{Namespace: "ns", Name: "c1"})
	if err != nil {
		r.t.Fatal(err)
	}
	st, _ := u.Object["status"].(map[string]any)
	return st
}

func condition(st map[string]any, typ string) map[string]any {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestDeleteOrder: once an instance has a deletionTimestamp, its resources
// are deleted dependents first (Service, then Deployment, then ConfigMap:
// the pipeline retracts each only after the one reading it is observed
// gone), and its status says DELETING, ResourcesReady Unknown
// UnderDeletion.
func TestDeleteOrder(t *testing.T) {
	r := newChainRun(t)
	r.apply(chainInstance(false))
	if got := r.present(); len(got) != 3 {
		t.Fatalf("before the deletion: %v, want the three resources", got)
	}
	r.mu.Lock()
	r.retracted = nil
	r.mu.Unlock()
	r.apply(chainInstance(true))
	if want := []string{"Service", "Deployment", "ConfigMap"}; !reflect.DeepEqual(r.retracted, want) {
		t.Errorf("retracted %v, want %v", r.retracted, want)
	}
	if got := r.present(); len(got) != 0 {
		t.Errorf("after the deletion: %v remain", got)
	}
	st := r.status()
	if st["state"] != "DELETING" {
		t.Errorf("state %v, want DELETING", st["state"])
	}
	for _, typ := range []string{"ResourcesReady", "Ready"} {
		c := condition(st, typ)
		if c["status"] != "Unknown" || c["reason"] != ReasonUnderDeletion || c["message"] != "every resource is deleted" {
			t.Errorf("%s: %v", typ, c)
		}
	}
}

// TestDeleteHeldByDependent: a dependent that stays (here a Service the
// controller did not create, as one held by its own finalizer stays)
// holds its dependencies; the status names it and its finalizers; once it
// is gone the rest goes in order. An instance first seen deleting gets
// nothing created.
func TestDeleteHeldByDependent(t *testing.T) {
	r := newChainRun(t)
	r.apply(chainInstance(false))
	// The Service, as someone else's: the Updater leaves it alone.
	svc, err := r.off.Store.Get(serviceGVK, object.Key{Namespace: "ns", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	svc = svc.DeepCopy()
	svc.SetAnnotations(nil)
	svc.SetFinalizers([]string{"example.com/hold"})
	if _, err := r.off.Store.Update(svc); err != nil {
		t.Fatal(err)
	}
	r.apply(chainInstance(true))
	if got, want := r.present(), []string{"ConfigMap", "Deployment", "Service"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("while the Service stays: %v, want %v", got, want)
	}
	msg := condition(r.status(), "ResourcesReady")["message"]
	if want := "deleting resources, dependents first; remaining: service (finalizers: example.com/hold), deployment, config"; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if err := r.off.Delete(context.Background(), serviceGVK, object.Key{Namespace: "ns", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if got := r.present(); len(got) != 0 {
		t.Errorf("after the Service went: %v remain", got)
	}

	fresh := newChainRun(t)
	fresh.apply(chainInstance(true))
	if got := fresh.present(); len(got) != 0 {
		t.Errorf("an instance first seen deleting got %v created", got)
	}
	if st := fresh.status(); st["state"] != "DELETING" {
		t.Errorf("state %v, want DELETING", st["state"])
	}
}

// TestDeleteCollectionHeld: the items of a collection that a resource
// reads are held while it exists, each only while it exists itself (an
// item deleted by hand is not created again), and go once the reader is
// gone.
func TestDeleteCollectionHeld(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "compile", "collection.rgd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(decodeRGD(t, string(src)))
	if err != nil {
		t.Fatal(err)
	}
	off, err := operator.NewOffline([]*opv1a1.Operator{c.Operator}, operator.OfflineOptions{
		Versions:          map[string]string{"kro.run/Fleet": "v1alpha1"},
		StatusSubresource: operator.InputStatusSubresource(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := off.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fleet := func(deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"regions": []any{"us", "eu"}, "tiers": []any{"web"}}}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "Fleet"})
		u.SetNamespace("ns")
		u.SetName("f1")
		u.SetUID("uid-f1")
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
			u.SetFinalizers([]string{InstanceFinalizer})
		}
		return u
	}
	secretGVK := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	names := func(gvk schema.GroupVersionKind) []string {
		var out []string
		for _, u := range off.Store.List(gvk) {
			out = append(out, u.GetName())
		}
		sort.Strings(out)
		return out
	}
	if err := off.Apply(ctx, fleet(false)); err != nil {
		t.Fatal(err)
	}
	if got := names(configMapGVK); !reflect.DeepEqual(got, []string{"f1-eu-web", "f1-us-web"}) {
		t.Fatalf("items %v", got)
	}
	// The summary, as someone else's: it stays.
	sec, err := off.Store.Get(secretGVK, object.Key{Namespace: "ns", Name: "f1-summary"})
	if err != nil {
		t.Fatal(err)
	}
	sec = sec.DeepCopy()
	sec.SetAnnotations(nil)
	if _, err := off.Store.Update(sec); err != nil {
		t.Fatal(err)
	}
	if err := off.Apply(ctx, fleet(true)); err != nil {
		t.Fatal(err)
	}
	if got := names(configMapGVK); !reflect.DeepEqual(got, []string{"f1-eu-web", "f1-us-web"}) {
		t.Fatalf("while the summary stays: items %v, want both", got)
	}
	if err := off.Delete(ctx, configMapGVK, object.Key{Namespace: "ns", Name: "f1-eu-web"}); err != nil {
		t.Fatal(err)
	}
	if got := names(configMapGVK); !reflect.DeepEqual(got, []string{"f1-us-web"}) {
		t.Fatalf("after deleting one item by hand: %v, want only f1-us-web (nothing created while deleting)", got)
	}
	if err := off.Delete(ctx, secretGVK, object.Key{Namespace: "ns", Name: "f1-summary"}); err != nil {
		t.Fatal(err)
	}
	if got := names(configMapGVK); len(got) != 0 {
		t.Fatalf("after the summary went: %v remain", got)
	}
}
