package controller

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestInvalidTargetNameSaysWhatToWrite: an object of a native kind whose
// name the API server's rule for that kind refuses (upper case, as names
// built for views may be) fails its write with the target's spec path and
// what to write instead.
func TestInvalidTargetNameSaysWhatToWrite(t *testing.T) {
	const y = `
name: upper
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: {"@concat": ["$.metadata.name", "-TCP-80"]}
      namespace: "$.metadata.namespace"
target: {apiGroup: "", version: v1, kind: ConfigMap}
`
	store := view.NewStore()
	c := mustNew(t, y, newClock().opts(StoreClient{Store: store}))
	err := c.Handle(context.Background(), nil, obj(podGVK, "ns", "p", nil))
	if err == nil {
		t.Fatal("an upper-case ConfigMap name was written")
	}
	for _, want := range []string{
		`spec.controllers[0].target: ConfigMap ns/p-TCP-80`,
		`metadata.name: Invalid value: "p-TCP-80"`,
		`make the pipeline's metadata.name a lower-case name of letters, digits, '-' and '.', e.g. {"@lower": <the name expression>}`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
}

// TestViewNamesTakeUpperCase: a view object may be named with upper case
// and ':' (as the successor's ServiceViews "<service>-TCP-80" are), and a
// name that breaks the view rule (a '/') fails with the rule's own message
// and no lower-case hint.
func TestViewNamesTakeUpperCase(t *testing.T) {
	const y = `
name: upper
sources: [{apiGroup: "", version: v1, kind: Pod}]
pipeline:
  "@project":
    metadata:
      name: {"@concat": ["$.metadata.name", "$.spec.suffix"]}
      namespace: "$.metadata.namespace"
target: {kind: Summary}
`
	store := view.NewStore()
	c := mustNew(t, y, newClock().opts(StoreClient{Store: store}))
	ctx := context.Background()
	pod := func(name, suffix string) *unstructured.Unstructured {
		return obj(podGVK, "ns", name, map[string]any{"spec": map[string]any{"suffix": suffix}})
	}
	if err := c.Handle(ctx, nil, pod("p", "-TCP-80:Web")); err != nil {
		t.Fatal(err)
	}
	gvk := c.Targets()[0].GVK
	if _, err := store.Get(gvk, object.Key{Namespace: "ns", Name: "p-TCP-80:Web"}); err != nil {
		t.Fatalf("the view p-TCP-80:Web: %v", err)
	}
	err := c.Handle(ctx, nil, pod("q", "/x"))
	if err == nil {
		t.Fatal("a view named q/x was written")
	}
	if want := `spec.controllers[0].target: Summary ns/q/x: Summary.test.view.dcontroller.io "q/x" is invalid: metadata.name: Invalid value: "q/x": may not contain '/'`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q\ndoes not contain %q", err, want)
	}
	if strings.Contains(err.Error(), "@lower") {
		t.Errorf("a lower-case hint for a name upper case does not break: %v", err)
	}
}
