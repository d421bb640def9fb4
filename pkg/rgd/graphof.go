package rgd

import krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"

// GraphOf decodes an RGD's spec.resources and spec.schema.status and
// builds their graph (BuildGraph): the Order a manager reports as the RGD's
// status.topologicalOrder and each node's DependsOn. Errors are *Error with
// the path into the RGD, as Compile gives them.
func GraphOf(rgd *krov1a1.ResourceGraphDefinition) (*Graph, error) {
	in, err := graphInput(rgd)
	if err != nil {
		return nil, err
	}
	return BuildGraph(in)
}
