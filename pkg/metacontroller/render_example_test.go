package metacontroller_test

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller"
)

// Render shows what a CompositeController would do to a parent, offline:
// its inline pipeline sync hook is called until the answers settle.
func ExampleRender() {
	cc := &mcv1a1.CompositeController{}
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: greeter}
spec:
  generateSelector: true
  parentResource: {apiVersion: example.com/v1, resource: greetings}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks:
    sync:
      pipeline:
        status: {children: {"@len": "$.children['ConfigMap.v1']"}}
        children:
          - apiVersion: v1
            kind: ConfigMap
            metadata: {name: "$.parent.metadata.name"}
            data: {text: {"@concat": ["hello, ", "$.parent.spec.who"]}}
`), cc); err != nil {
		panic(err)
	}
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Greeting",
		"metadata": map[string]any{"name": "hi", "namespace": "demo"},
		"spec":     map[string]any{"who": "world"},
	}}
	res, err := metacontroller.Render(context.Background(), []client.Object{cc}, []*unstructured.Unstructured{parent}, metacontroller.RenderOptions{})
	if err != nil {
		panic(err)
	}
	for _, o := range res.Objects {
		status, _, _ := unstructured.NestedMap(o.Object, "status")
		text, _, _ := unstructured.NestedString(o.Object, "data", "text")
		fmt.Println(strings.TrimSpace(fmt.Sprintln(o.GetKind(), o.GetNamespace()+"/"+o.GetName(), status, text)))
	}
	fmt.Println(len(res.Calls), "sync calls")
	// Output:
	// Greeting demo/hi map[children:1 observedGeneration:1]
	// ConfigMap demo/hi map[] hello, world
	// 3 sync calls
}
