package rgdruntime

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcontroller/dcontroller/internal/testcontrolplane"
)

// restConfig reaches the package's kube-apiserver (envtest, started once
// by TestMain from bin/k8s).
var restConfig *rest.Config

func TestMain(m *testing.M) { os.Exit(testcontrolplane.Run(m, "rgdruntime", &restConfig)) }

// widgetGVK is the instance kind of the release tests, served by a CRD
// the tests install.
var widgetGVK = schema.GroupVersionKind{Group: "release.test.dcontroller.io", Version: "v1", Kind: "Widget"}

// installWidgets installs the CRD of widgetGVK (once) and returns a client.
func installWidgets(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
	ctx := context.Background()
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(widgetGVK.GroupVersion().WithKind("WidgetList"))
		err := c.List(ctx, list, client.InNamespace("default"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Widget CRD is not served after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return c
}

// widget is the Widget name in the namespace default, with finalizers.
func widget(name string, finalizers ...string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	w.SetNamespace("default")
	w.SetName(name)
	w.SetFinalizers(finalizers)
	return w
}

// testGuard is the instanceGuard of the Widgets, reading and writing
// through c.
func testGuard(c client.Client) *instanceGuard {
	return &instanceGuard{gvk: widgetGVK, client: c, reader: c, log: logr.Discard()}
}

// createWidget creates a Widget carrying InstanceFinalizer and another
// controller's finalizer.
func createWidget(t *testing.T, c client.Client, name string) {
	t.Helper()
	w := widget(name, InstanceFinalizer, "example.com/other")
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The other controller's finalizer goes, so that the Widget does.
		_ = c.Patch(context.Background(), w, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
}

// readMeta reads a Widget's metadata, as release lists it.
func readMeta(t *testing.T, c client.Client, name string) *metav1.PartialObjectMetadata {
	t.Helper()
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(widgetGVK)
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReleaseOneRetriesAConflict: the instance changed since it was read
// (here a label, added by another client; at an RGD's deletion typically
// the deletionTimestamp that its CRD's deletion sets): the API server
// refuses the first write (409 Conflict) and releaseOne reads the instance
// again and removes the finalizer, leaving the other controller's.
func TestReleaseOneRetriesAConflict(t *testing.T) {
	c := installWidgets(t)
	createWidget(t, c, "changed")
	stale := readMeta(t, c, "changed")
	if err := c.Patch(context.Background(), stale.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"changed":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	g := testGuard(c)
	// The stale copy is what the API server refuses.
	if err := g.setFinalizers(context.Background(), stale.DeepCopy(), []string{"example.com/other"}); !apierrors.IsConflict(err) {
		t.Fatalf("a write of the stale copy: %v, want a conflict", err)
	}
	removed, err := g.releaseOne(context.Background(), stale)
	if err != nil || !removed {
		t.Fatalf("releaseOne: removed %v, error %v", removed, err)
	}
	if got := readMeta(t, c, "changed").GetFinalizers(); len(got) != 1 || got[0] != "example.com/other" {
		t.Errorf("finalizers %v, want [example.com/other]", got)
	}
}

// TestReleaseOneInstanceBeingDeleted: the instance was deleted after it
// was read (deletionTimestamp set, held by the finalizers): the finalizer
// still goes, and a second release finds nothing to remove.
func TestReleaseOneInstanceBeingDeleted(t *testing.T) {
	c := installWidgets(t)
	createWidget(t, c, "deleted")
	stale := readMeta(t, c, "deleted")
	if err := c.Delete(context.Background(), widget("deleted")); err != nil {
		t.Fatal(err)
	}
	g := testGuard(c)
	removed, err := g.releaseOne(context.Background(), stale)
	if err != nil || !removed {
		t.Fatalf("releaseOne: removed %v, error %v", removed, err)
	}
	now := readMeta(t, c, "deleted")
	if now.DeletionTimestamp == nil || len(now.Finalizers) != 1 || now.Finalizers[0] != "example.com/other" {
		t.Errorf("after the release: deletionTimestamp %v, finalizers %v; want set, [example.com/other]", now.DeletionTimestamp, now.Finalizers)
	}
	removed, err = g.releaseOne(context.Background(), now)
	if err != nil || removed {
		t.Errorf("a second release: removed %v, error %v; want nothing to remove", removed, err)
	}
}

// TestReleaseOneInstanceGone: an instance deleted for good since it was
// read is no error and nothing removed.
func TestReleaseOneInstanceGone(t *testing.T) {
	c := installWidgets(t)
	w := widget("gone", InstanceFinalizer)
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	stale := readMeta(t, c, "gone")
	if err := c.Patch(context.Background(), w, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	g := testGuard(c)
	removed, err := g.releaseOne(context.Background(), stale)
	if err != nil || removed {
		t.Errorf("releaseOne of a deleted instance: removed %v, error %v; want neither", removed, err)
	}
}
