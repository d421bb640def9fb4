package object

import (
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateMetadata checks an object's metadata as the Kubernetes API server
// checks a custom resource's:
//
//   - metadata must decode into metav1.ObjectMeta (labels: ["a"] does not);
//     otherwise the error is BadRequest (400) with the decoder's message, as
//     kube-apiserver answers ("... cannot be handled as a <Kind>: json:
//     cannot unmarshal array into Go struct field ObjectMeta.labels ...");
//   - then k8s.io/apimachinery/pkg/api/validation.ValidateObjectMetaAccessor
//     with NameIsDNSSubdomain: metadata.name is a DNS subdomain (RFC 1123: at
//     most 253 lowercase alphanumerics, '-' and '.'), metadata.namespace a
//     DNS label and required exactly when namespaced, labels and
//     annotations follow the Kubernetes syntax; otherwise the error is
//     Invalid (422) with one cause per field path.
//
// The view API server, the runtime's in-memory store and dctl eval all
// check objects with this one function.
func ValidateMetadata(obj *unstructured.Unstructured, namespaced bool) error {
	gvk := obj.GroupVersionKind()
	meta, err := objectMeta(obj)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	errs := validation.ValidateObjectMetaAccessor(meta, namespaced, validation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gvk.GroupKind(), meta.Name, errs)
}

// objectMeta decodes metadata as the API server's decoder does: through
// JSON into metav1.ObjectMeta, so a field of the wrong type is an error.
func objectMeta(obj *unstructured.Unstructured) (*metav1.ObjectMeta, error) {
	meta := &metav1.ObjectMeta{}
	raw, ok := obj.Object["metadata"]
	if !ok || raw == nil {
		return meta, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

// ValidateKind checks a kind name with the rule Kubernetes applies to a
// CustomResourceDefinition's spec.names.kind: the lowercased kind must be a
// DNS-1035 label (at most 63 characters, ASCII letters, digits and '-',
// starting with a letter and ending with a letter or digit), so "AppSummary"
// is valid and "@@@", "my_kind" or an emoji are not. fldPath is the path of
// the kind field, which the errors carry.
func ValidateKind(kind string, fldPath *field.Path) field.ErrorList {
	if kind == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	msgs := utilvalidation.IsDNS1035Label(strings.ToLower(kind))
	if len(msgs) == 0 && !isASCII(kind) {
		// Lowercasing maps a few non-ASCII letters (the Kelvin sign) to ASCII.
		msgs = []string{"must contain only ASCII characters"}
	}
	if len(msgs) > 0 {
		return field.ErrorList{field.Invalid(fldPath, kind,
			fmt.Sprintf("may have mixed case, but should otherwise match: %s", strings.Join(msgs, ",")))}
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
