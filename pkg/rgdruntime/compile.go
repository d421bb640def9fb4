package rgdruntime

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// Compiled is what the Reconciler runs of one RGD.
type Compiled struct {
	// CRD is the instance kind's CustomResourceDefinition (rgd.CRD).
	CRD *apiextensionsv1.CustomResourceDefinition
	// Operator holds the controllers that produce each instance's
	// resources and status; nil when the RGD's resources are not compiled
	// into controllers (the RGD is then not Ready: ControllerReady says
	// why).
	Operator *opv1a1.Operator
	// Graph is the RGD's resource graph: its Order is the RGD's
	// status.topologicalOrder, its nodes' DependsOn status.resources.
	Graph *rgd.Graph
}

// CompileFunc compiles an RGD. Errors should be *rgd.Error, whose path
// names the RGD field at fault; the Reconciler puts them in the
// GraphAccepted condition as they read.
type CompileFunc func(*krov1a1.ResourceGraphDefinition) (*Compiled, error)

// Compile is the Reconciler's default CompileFunc: the instance CRD of
// rgd.CRD and the graph of rgd.BuildGraph. It compiles no controllers yet
// (Compiled.Operator is nil).
func Compile(r *krov1a1.ResourceGraphDefinition) (*Compiled, error) {
	crd, err := rgd.CRD(r)
	if err != nil {
		return nil, err
	}
	in, err := GraphInput(r)
	if err != nil {
		return nil, err
	}
	g, err := rgd.BuildGraph(in)
	if err != nil {
		return nil, err
	}
	return &Compiled{CRD: crd, Graph: g}, nil
}

// GraphInput decodes an RGD's spec.resources and spec.schema.status into
// what rgd.BuildGraph reads. Errors are *rgd.Error at the field that does
// not decode (a template that is not a JSON object).
func GraphInput(r *krov1a1.ResourceGraphDefinition) (rgd.GraphInput, error) {
	var in rgd.GraphInput
	if r.Spec.Schema != nil {
		st, err := decodeObject(r.Spec.Schema.Status, "spec.schema.status")
		if err != nil {
			return in, err
		}
		in.Status = st
	}
	for i, res := range r.Spec.Resources {
		path := rgd.Index("spec.resources", i)
		if res == nil {
			return in, &rgd.Error{Path: path, Err: fmt.Errorf("resource is null")}
		}
		ri := rgd.ResourceInput{ID: res.ID, ReadyWhen: res.ReadyWhen, IncludeWhen: res.IncludeWhen}
		t, err := decodeObject(res.Template, rgd.Field(path, "template"))
		if err != nil {
			return in, err
		}
		ri.Template = t
		if res.ExternalRef != nil {
			b, err := json.Marshal(res.ExternalRef)
			if err != nil {
				return in, &rgd.Error{Path: rgd.Field(path, "externalRef"), Err: err}
			}
			if err := json.Unmarshal(b, &ri.ExternalRef); err != nil {
				return in, &rgd.Error{Path: rgd.Field(path, "externalRef"), Err: err}
			}
		}
		for _, d := range res.ForEach {
			ri.ForEach = append(ri.ForEach, map[string]string(d))
		}
		in.Resources = append(in.Resources, ri)
	}
	return in, nil
}

// decodeObject decodes a raw JSON object; empty is nil.
func decodeObject(raw runtime.RawExtension, path string) (map[string]any, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw.Raw, &m); err != nil {
		return nil, &rgd.Error{Path: path, Err: fmt.Errorf("want an object: %v", err)}
	}
	return m, nil
}
