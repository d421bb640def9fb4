package rgd

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
)

// schemaRoot is where the API server's validation of a one-version CRD
// puts the schema in its field paths.
const schemaRoot = "spec.validation.openAPIV3Schema"

// validateCRD runs the API server's own validation of a CRD (the
// apiextensions-apiserver validation package: structural schema, defaults
// valid against their schemas, enum and pattern, CEL rules that compile,
// list-map keys that are required or defaulted, names, printer columns) on
// a generated CRD, so that an RGD the API server would refuse fails here,
// offline, with the path of the SimpleSchema field at fault. It returns
// the first error, an *Error.
func validateCRD(crd *apiextensionsv1.CustomResourceDefinition) error {
	in := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(in)
	in.Status.StoredVersions = []string{in.Spec.Versions[0].Name}
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(in, &internal, nil); err != nil {
		return errorf(schemaPath, "cannot convert the generated CRD: %v", err)
	}
	errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal)
	if len(errs) == 0 {
		return nil
	}
	path, rest := rgdPath(errs[0].Field)
	msg := errs[0].ErrorBody()
	if rest != "" {
		msg = rest + ": " + msg
	}
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return errorf(path, "the API server would refuse the generated CRD: %s", msg)
}

// rgdPath maps the field path of a CRD validation error back to the RGD:
// the schema's properties[spec].properties[a].properties[b] is the
// SimpleSchema field spec.schema.spec.a.b, and whatever follows the last
// property (items, default, ...) is returned as rest. Any other path maps
// to spec.schema, with the CRD's path as rest.
func rgdPath(p string) (path, rest string) {
	s, ok := strings.CutPrefix(p, schemaRoot)
	if !ok {
		return schemaPath, p
	}
	var segs []string
	for {
		t, ok := strings.CutPrefix(s, ".properties[")
		if !ok {
			break
		}
		end := strings.IndexByte(t, ']')
		if end < 0 {
			break
		}
		segs, s = append(segs, t[:end]), t[end+1:]
	}
	if len(segs) == 0 || (segs[0] != "spec" && segs[0] != "status") {
		return schemaPath, p
	}
	path = Field(schemaPath, segs[0])
	for _, k := range segs[1:] {
		path = Field(path, k)
	}
	return path, strings.TrimPrefix(s, ".")
}
