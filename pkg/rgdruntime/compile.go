package rgdruntime

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// Compiled is what the Reconciler runs of one RGD.
type Compiled struct {
	// CRD is the instance kind's CustomResourceDefinition.
	CRD *apiextensionsv1.CustomResourceDefinition
	// Operator holds the controllers that produce each instance's
	// resources and status; it runs under its own name
	// (rgd.OperatorName of the RGD's). nil: the RGD's resources are not
	// run (ControllerReady False, NotCompiled).
	Operator *opv1a1.Operator
	// Graph is the RGD's resource graph: its Order is the RGD's
	// status.topologicalOrder, its nodes' DependsOn status.resources.
	Graph *rgd.Graph
}

// CompileFunc compiles an RGD. Errors should be *rgd.Error, whose path
// names the RGD field at fault; the Reconciler puts them in the
// GraphAccepted condition as they read.
type CompileFunc func(*krov1a1.ResourceGraphDefinition) (*Compiled, error)

// Compile is the Reconciler's default CompileFunc: rgd.Compile (the
// instance CRD and the Operator) and rgd.GraphOf (the graph).
func Compile(r *krov1a1.ResourceGraphDefinition) (*Compiled, error) {
	c, err := rgd.Compile(r)
	if err != nil {
		return nil, err
	}
	g, err := rgd.GraphOf(r)
	if err != nil {
		return nil, err
	}
	return &Compiled{CRD: c.CRD, Operator: c.Operator, Graph: g}, nil
}
