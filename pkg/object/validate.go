package object

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateMetadata checks an object's metadata with the rules the
// Kubernetes API server applies to custom resources
// (k8s.io/apimachinery/pkg/api/validation.ValidateObjectMetaAccessor with
// NameIsDNSSubdomain): metadata.name (or generateName) is a DNS subdomain
// (RFC 1123: at most 253 lowercase alphanumerics, '-' and '.'),
// metadata.namespace a DNS label and required exactly when namespaced,
// labels and annotations follow the label and annotation syntax, and the
// well-known metadata fields have their Kubernetes types (labels: ["a"] is
// refused at metadata.labels instead of being read as no labels).
//
// The error is nil or an Invalid API error (422, reason Invalid) whose
// causes carry the field paths, as kube-apiserver returns it. The view API
// server, the runtime's in-memory store and dctl eval all check objects with
// this one function.
func ValidateMetadata(obj *unstructured.Unstructured, namespaced bool) error {
	errs := MetadataErrors(obj, namespaced)
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), nameOf(obj), errs)
}

// MetadataErrors is ValidateMetadata's list of field errors.
func MetadataErrors(obj *unstructured.Unstructured, namespaced bool) field.ErrorList {
	path := field.NewPath("metadata")
	raw, ok := obj.Object["metadata"]
	if !ok || raw == nil {
		raw = map[string]any{}
	}
	md, ok := raw.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(path, raw, "must be an object")}
	}
	var errs field.ErrorList
	for _, k := range []string{"name", "generateName", "namespace", "uid", "resourceVersion"} {
		if v, ok := md[k]; ok && v != nil {
			if _, ok := v.(string); !ok {
				errs = append(errs, field.Invalid(path.Child(k), v, "must be a string"))
			}
		}
	}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := md[k]; ok && v != nil {
			errs = append(errs, stringMapErrors(v, path.Child(k))...)
		}
	}
	if v, ok := md["finalizers"]; ok && v != nil {
		if l, ok := v.([]any); !ok {
			errs = append(errs, field.Invalid(path.Child("finalizers"), v, "must be a list of strings"))
		} else {
			for i, e := range l {
				if _, ok := e.(string); !ok {
					errs = append(errs, field.Invalid(path.Child("finalizers").Index(i), e, "must be a string"))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	meta := &metav1.ObjectMeta{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(md, meta); err != nil {
		return field.ErrorList{field.Invalid(path, raw, err.Error())}
	}
	return validation.ValidateObjectMetaAccessor(meta, namespaced, validation.NameIsDNSSubdomain, path)
}

func stringMapErrors(v any, path *field.Path) field.ErrorList {
	m, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(path, v, "must be a map of string keys to string values")}
	}
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, ok := m[k].(string); !ok {
			errs = append(errs, field.Invalid(path.Key(k), m[k], "must be a string"))
		}
	}
	return errs
}

// nameOf is metadata.name when it is a string, for the error's details.
func nameOf(obj *unstructured.Unstructured) string {
	md, _ := obj.Object["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	return name
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
