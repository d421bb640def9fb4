package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	sigsjson "sigs.k8s.io/json"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// isRGD reports whether an object's apiVersion and kind are kro's
// ResourceGraphDefinition.
func isRGD(apiVersion, kind string) bool {
	return apiVersion == krov1a1.GroupVersion.String() && kind == "ResourceGraphDefinition"
}

// compileRGD decodes a ResourceGraphDefinition strictly (an unknown field is
// an error, as the API server reports it) and compiles it into its Operator
// (rgd.Compile). Errors name where, and the RGD field at fault.
func compileRGD(raw []byte, where string) (*rgd.Compiled, error) {
	r := &krov1a1.ResourceGraphDefinition{}
	strict, err := sigsjson.UnmarshalStrict(raw, r, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s: %w", where, strict[0])
	}
	c, err := rgd.Compile(r)
	if err != nil {
		return nil, fmt.Errorf("%s: ResourceGraphDefinition %q: %w", where, r.Name, err)
	}
	return c, nil
}

// readOperatorsAndRGDs reads the Operators of a YAML or JSON stream, and
// the Operators the ResourceGraphDefinitions among them compile to. A file
// without an RGD is read as readOperators reads it.
func readOperatorsAndRGDs(path string) ([]*opv1a1.Operator, error) {
	ops, _, err := readOperatorsAndRGDsAll(path)
	return ops, err
}

// readOperatorsAndRGDsAll is readOperatorsAndRGDs that also returns the
// ResourceGraphDefinitions themselves.
func readOperatorsAndRGDsAll(path string) ([]*opv1a1.Operator, []*krov1a1.ResourceGraphDefinition, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	objs, err := operator.DecodeObjects(fh)
	fh.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	any := false
	for _, obj := range objs {
		if isRGD(obj.GetAPIVersion(), obj.GetKind()) {
			any = true
		}
	}
	if !any {
		ops, err := readOperators(path)
		return ops, nil, err
	}
	var ops []*opv1a1.Operator
	var rgds []*krov1a1.ResourceGraphDefinition
	for i, obj := range objs {
		where := fmt.Sprintf("%s: object %d (%s %s)", path, i+1, obj.GetKind(), obj.GetName())
		raw, err := json.Marshal(obj.Object)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		if isRGD(obj.GetAPIVersion(), obj.GetKind()) {
			c, err := compileRGD(raw, where)
			if err != nil {
				return nil, nil, err
			}
			ops = append(ops, c.Operator)
			g := &krov1a1.ResourceGraphDefinition{}
			if err := json.Unmarshal(raw, g); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			}
			rgds = append(rgds, g)
			continue
		}
		loaded, err := operator.DecodeOperators(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", where, err)
		}
		ops = append(ops, loaded...)
	}
	return ops, rgds, nil
}

// readOperatorsAndCRDs is readOperatorsAndRGDs that also returns the
// instance CRDs of the ResourceGraphDefinitions (rgd.CRD), which dctl eval
// and dctl test read defaults and scopes from.
func readOperatorsAndCRDs(path string) ([]*opv1a1.Operator, []*apiextensionsv1.CustomResourceDefinition, error) {
	ops, rgds, err := readOperatorsAndRGDsAll(path)
	if err != nil {
		return nil, nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, g := range rgds {
		crd, err := rgd.CRD(g)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: ResourceGraphDefinition %q: %w", path, g.Name, err)
		}
		crds = append(crds, crd)
	}
	return ops, crds, nil
}
