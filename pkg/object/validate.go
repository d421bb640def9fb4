package object

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// ValidateMetadata checks an object's metadata as the Kubernetes API server
// checks it:
//
//   - metadata must decode into metav1.ObjectMeta (labels: ["a"] does not);
//     otherwise the error is BadRequest (400) with the decoder's message, as
//     kube-apiserver answers ("... cannot be handled as a <Kind>: json:
//     cannot unmarshal array into Go struct field ObjectMeta.labels ...");
//   - then k8s.io/apimachinery/pkg/api/validation.ValidateObjectMetaAccessor
//     with the name rule of the object's kind (NameRule): metadata.namespace
//     a DNS label and required exactly when namespaced, labels and
//     annotations follow the Kubernetes syntax; otherwise the error is
//     Invalid (422) with one cause per field path.
//
// The view API server, the runtime's in-memory store and dctl eval all
// check objects with this one function. Objects the runtime writes to a
// Kubernetes API server are not checked here: that server decides.
func ValidateMetadata(obj *unstructured.Unstructured, namespaced bool) error {
	gvk := obj.GroupVersionKind()
	meta, err := objectMeta(obj)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	errs := validation.ValidateObjectMetaAccessor(meta, namespaced, NameRule(gvk.GroupKind()), field.NewPath("metadata"))
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gvk.GroupKind(), meta.Name, errs)
}

// MaxViewNameLength is the longest metadata.name of a view object, in
// bytes: the bound of a Kubernetes DNS subdomain name (253), so that a
// view name fits wherever an object name does.
const MaxViewNameLength = 253

// NameRule returns the rule metadata.name of an object of kind gk follows,
// in the form ValidateObjectMetaAccessor takes (name, prefix) -> messages:
//
//   - a view (group "<operator>.view.dcontroller.io"): ValidateViewName;
//   - the RBAC kinds Role, ClusterRole, RoleBinding and ClusterRoleBinding
//     (group rbac.authorization.k8s.io): Kubernetes' path-segment rule
//     (k8s.io/apimachinery/pkg/api/validate/content.IsPathSegmentName), as
//     kube-apiserver validates their names ("system:controller:x" is valid);
//   - every other kind: a DNS subdomain (RFC 1123: at most 253 lowercase
//     alphanumerics, '-' and '.'), the rule kube-apiserver applies to custom
//     resources and to most built-in kinds (a few built-in kinds, such as
//     Service and Namespace, have a stricter rule there, not checked here).
func NameRule(gk schema.GroupKind) validation.ValidateNameFunc {
	switch {
	case opv1a1.IsViewGroup(gk.Group):
		return ValidateViewName
	case gk.Group == "rbac.authorization.k8s.io" &&
		(gk.Kind == "Role" || gk.Kind == "ClusterRole" || gk.Kind == "RoleBinding" || gk.Kind == "ClusterRoleBinding"):
		return pathSegmentName
	}
	return validation.NameIsDNSSubdomain
}

// ValidateViewName checks the metadata.name of a view object (prefix: a
// generateName, which gets a suffix before the name is checked again). A
// view name follows Kubernetes' path-segment rule, the rule kube-apiserver
// applies to RBAC Role names: it is not "." or "..", and contains no '/'
// or '%' (so it is one segment of a URL path and of a "<namespace>/<name>"
// cache key). Within that, any UTF-8 text is valid: upper case, ':', '_'
// and spaces ("web-TCP-80", "system:web"). Two bounds are ours: at most
// MaxViewNameLength bytes, and valid UTF-8 (JSON, RFC 8259 §8.1, carries
// nothing else, so another name would change on its way to a client). It
// returns one message per broken rule, none for a valid name.
func ValidateViewName(name string, prefix bool) []string {
	msgs := pathSegmentName(name, prefix)
	if len(name) > MaxViewNameLength {
		msgs = append(msgs, utilvalidation.MaxLenError(MaxViewNameLength))
	}
	if !utf8.ValidString(name) {
		msgs = append(msgs, "must be valid UTF-8")
	}
	return msgs
}

// pathSegmentName is Kubernetes' path-segment rule for names: a prefix
// (generateName) may be "." or "..", a name may not.
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
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
	// JSON replaces bytes that are not UTF-8; the name rules see the
	// names as stored.
	if m, ok := raw.(map[string]any); ok {
		if n, ok := m["name"].(string); ok {
			meta.Name = n
		}
		if n, ok := m["generateName"].(string); ok {
			meta.GenerateName = n
		}
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

// NonFiniteDetail is the detail of the field error ValidateEncodable returns
// for a non-finite number.
const NonFiniteDetail = "not a valid JSON number: JSON (RFC 8259 §6) has no NaN or Infinity, and the Kubernetes API refuses them"

// MaxNesting is the deepest nesting of maps and lists ValidateEncodable
// accepts: encoding/json, and so the Kubernetes API server and its
// clients, refuse to decode a value nested deeper.
const MaxNesting = 10000

// ValidateEncodable checks that v, an unstructured value (maps with string
// keys, lists, strings, bools, nil, int64, float64; float32 is checked
// too), can be encoded as JSON that Kubernetes clients decode: every
// number is finite (JSON, RFC 8259 §6, has no NaN or ±Inf, and the
// Kubernetes API server never stores one) and maps and lists nest at most
// MaxNesting levels. A view holding such an object would fail every list
// and watch of its kind. fldPath is the path of v (nil at an object's
// root).
//
// It returns no error for a valid value, else one Invalid field error
// naming the first offending value in sorted key order, e.g.
// `status.ratio: Invalid value: NaN: not a valid JSON number ...`. A valid
// value is walked once without allocating.
func ValidateEncodable(v any, fldPath *field.Path) field.ErrorList {
	if !hasNonFinite(v, 0) {
		return nil
	}
	if err := firstNonFinite(v, fldPath, 0); err != nil {
		return field.ErrorList{err}
	}
	return nil
}

func nonFinite(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }

// hasNonFinite reports whether v holds a non-finite number or nests deeper
// than MaxNesting.
func hasNonFinite(v any, depth int) bool {
	switch x := v.(type) {
	case float64:
		return nonFinite(x)
	case float32:
		return nonFinite(float64(x))
	case map[string]any:
		if depth >= MaxNesting {
			return true
		}
		for _, e := range x {
			if hasNonFinite(e, depth+1) {
				return true
			}
		}
	case []any:
		if depth >= MaxNesting {
			return true
		}
		for _, e := range x {
			if hasNonFinite(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// firstNonFinite returns the error of the first non-finite number of v in
// sorted key order, or of the first map or list nested too deeply.
func firstNonFinite(v any, p *field.Path, depth int) *field.Error {
	switch x := v.(type) {
	case float64:
		if nonFinite(x) {
			return field.Invalid(p, x, NonFiniteDetail)
		}
	case float32:
		if nonFinite(float64(x)) {
			return field.Invalid(p, float64(x), NonFiniteDetail)
		}
	case map[string]any:
		if depth >= MaxNesting {
			return field.Invalid(p, "map", fmt.Sprintf("nested more than %d levels deep", MaxNesting))
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kp := p
			if depth < maxPathDepth {
				kp = childPath(p, k)
			} else if depth == maxPathDepth {
				kp = p.Child("...")
			}
			if err := firstNonFinite(x[k], kp, depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth >= MaxNesting {
			return field.Invalid(p, "list", fmt.Sprintf("nested more than %d levels deep", MaxNesting))
		}
		for i, e := range x {
			ip := p
			switch {
			case depth == maxPathDepth:
				ip = p.Child("...")
			case depth > maxPathDepth:
			case p == nil:
				ip = field.NewPath("").Index(i)
			default:
				ip = p.Index(i)
			}
			if err := firstNonFinite(e, ip, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxPathDepth bounds the path of an error: deeper levels are written as
// one "..." so that the error of a value nested thousands of levels deep
// stays short.
const maxPathDepth = 32

// childPath is the path of member k of the map at p: `p.k` for a key made
// of letters, digits, '_' and '-', else `p[k]`, as the Kubernetes API
// writes paths into maps such as labels.
func childPath(p *field.Path, k string) *field.Path {
	plain := k != ""
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	switch {
	case p == nil && plain:
		return field.NewPath(k)
	case p == nil:
		return field.NewPath("").Key(k)
	case plain:
		return p.Child(k)
	}
	return p.Key(k)
}
