package apiserver_test

import (
	"fmt"

	"github.com/dcontroller/dcontroller/pkg/apiserver"
)

// Kinds are served under the lowercase plural a CRD of the kind would get.
func ExampleResourceName() {
	for _, kind := range []string{"DeploymentSummary", "Gateway", "Endpoints", "Policy"} {
		fmt.Println(kind, apiserver.ResourceName(kind))
	}
	// Output:
	// DeploymentSummary deploymentsummaries
	// Gateway gateways
	// Endpoints endpoints
	// Policy policies
}

// A request resolves to the resource, namespace, name and verb it
// addresses; a list selecting one name is authorized as naming it.
func ExampleParseRequestPath() {
	t, _ := apiserver.ParseRequestPath("GET", "/apis/shop.view.dcontroller.io/v1alpha1/namespaces/team-a/carts?fieldSelector=metadata.name%3Dweb")
	fmt.Println(t.GroupVersion, t.Resource, t.Namespace, t.Name, t.Verb)
	fmt.Println(t.Method(), t.URL())
	// Output:
	// shop.view.dcontroller.io/v1alpha1 carts team-a web list
	// GET /apis/shop.view.dcontroller.io/v1alpha1/namespaces/team-a/carts?fieldSelector=metadata.name%3Dweb
}
