package hookapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

// TypeKey returns the key of an object type in an ObjectMap:
// "<Kind>.<apiVersion>", e.g. "Pod.v1" or "StatefulSet.apps/v1".
func TypeKey(gvk schema.GroupVersionKind) string {
	return gvk.Kind + "." + gvk.GroupVersion().String()
}

// ParseTypeKey is the inverse of TypeKey. The kind is everything before the
// first dot; the rest must be a valid apiVersion.
func ParseTypeKey(key string) (schema.GroupVersionKind, error) {
	kind, apiVersion, ok := strings.Cut(key, ".")
	if !ok || kind == "" || apiVersion == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("type key %q: want <Kind>.<apiVersion>", key)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("type key %q: %w", key, err)
	}
	return gv.WithKind(kind), nil
}

// ObjectKey returns the key of obj inside its type's map, for the given
// contract version (empty means v1). parentNamespace is "" for a
// cluster-scoped parent.
//
//   - v1: the name, or "<namespace>/<name>" when the parent is
//     cluster-scoped and obj is namespaced;
//   - v2: "<namespace>/<name>" for a namespaced obj, the name otherwise.
func ObjectKey(version mcv1a1.HookVersion, parentNamespace string, obj *unstructured.Unstructured) string {
	ns := obj.GetNamespace()
	if ns == "" {
		return obj.GetName()
	}
	if version == mcv1a1.HookVersionV2 || parentNamespace == "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// ObjectMap groups observed objects by type key, then by object key:
// {"Pod.v1": {"web-0": {...}}}. Every declared type has an entry, even when
// empty.
type ObjectMap map[string]map[string]*unstructured.Unstructured

// Init makes sure the type of gvk has an entry.
func (m ObjectMap) Init(gvk schema.GroupVersionKind) {
	k := TypeKey(gvk)
	if m[k] == nil {
		m[k] = map[string]*unstructured.Unstructured{}
	}
}

// Insert adds obj under its type key (taken from its apiVersion and kind)
// and its ObjectKey.
func (m ObjectMap) Insert(version mcv1a1.HookVersion, parentNamespace string, obj *unstructured.Unstructured) {
	gvk := obj.GroupVersionKind()
	m.Init(gvk)
	m[TypeKey(gvk)][ObjectKey(version, parentNamespace, obj)] = obj
}

// List returns every object, sorted by type key then object key.
func (m ObjectMap) List() []*unstructured.Unstructured {
	types := make([]string, 0, len(m))
	for t := range m {
		types = append(types, t)
	}
	sort.Strings(types)
	var out []*unstructured.Unstructured
	for _, t := range types {
		keys := make([]string, 0, len(m[t]))
		for k := range m[t] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, m[t][k])
		}
	}
	return out
}

// CompositeRequest is the body of a CompositeController sync or finalize
// hook call.
type CompositeRequest struct {
	// Controller is the whole CompositeController.
	Controller *mcv1a1.CompositeController `json:"controller"`
	// Parent is the parent object as observed.
	Parent *unstructured.Unstructured `json:"parent"`
	// Children are the observed children the parent owns, one entry per
	// child resource rule.
	Children ObjectMap `json:"children"`
	// Related are the objects the customize hook asked for (empty without a
	// customize hook).
	Related ObjectMap `json:"related"`
	// Finalizing is true for the finalize hook, false for sync.
	Finalizing bool `json:"finalizing"`
}

// CompositeResponse is the body of a CompositeController sync or finalize
// hook response.
type CompositeResponse struct {
	// Status replaces the parent's status (observedGeneration is added).
	Status map[string]any `json:"status"`
	// Children is the flat list of desired children; observed children that
	// are not listed are deleted.
	Children []map[string]any `json:"children"`
	// ResyncAfterSeconds > 0 asks for one more sync of this parent after that
	// many seconds.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized (finalize hook only) says that cleanup is done and the
	// parent's finalizer may go.
	Finalized bool `json:"finalized"`
}

// DecoratorRequest is the body of a DecoratorController sync or finalize
// hook call.
type DecoratorRequest struct {
	// Controller is the whole DecoratorController.
	Controller *mcv1a1.DecoratorController `json:"controller"`
	// Object is the decorated object as observed.
	Object *unstructured.Unstructured `json:"object"`
	// Attachments are the observed attachments, one entry per attachment
	// rule.
	Attachments ObjectMap `json:"attachments"`
	// Related are the objects the customize hook asked for.
	Related ObjectMap `json:"related"`
	// Finalizing is true for the finalize hook.
	Finalizing bool `json:"finalizing"`
}

// DecoratorResponse is the body of a DecoratorController sync or finalize
// hook response.
type DecoratorResponse struct {
	// Labels are set on the object; a null value removes the label.
	Labels map[string]*string `json:"labels"`
	// Annotations are set on the object; a null value removes it.
	Annotations map[string]*string `json:"annotations"`
	// Status, when not null, replaces the object's status.
	Status map[string]any `json:"status"`
	// Attachments is the flat list of desired attachments.
	Attachments []map[string]any `json:"attachments"`
	// ResyncAfterSeconds > 0 asks for one more sync after that many seconds.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized (finalize hook only) says that cleanup is done.
	Finalized bool `json:"finalized"`
}

// CustomizeRequest is the body of a customize hook call.
type CustomizeRequest struct {
	// Controller is the whole CompositeController or DecoratorController.
	Controller any `json:"controller"`
	// Parent is the parent (or decorated) object.
	Parent *unstructured.Unstructured `json:"parent"`
}

// CustomizeResponse is the body of a customize hook response.
type CustomizeResponse struct {
	// RelatedResourceRules select the related objects of the parent.
	RelatedResourceRules []*mcv1a1.RelatedResourceRule `json:"relatedResources"`
}

// Decode decodes a hook response body, which must be a JSON object, into
// out (a pointer to one of the response types). Integers decode as int64, floats as float64, and field
// names match case-sensitively. In strict mode unknown and duplicated fields
// are errors; in loose mode they are ignored. Errors name the offending
// field.
func Decode(data []byte, strict bool, out any) error {
	// A response must be an object: `null` (a handler that forgot its
	// return value) would otherwise decode as "no children" and delete
	// them all.
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		got := string(t)
		if len(got) > 20 {
			got = got[:20] + "..."
		}
		return fmt.Errorf("the response must be a JSON object, got %q", got)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(data, out)
	if err != nil {
		return describeDecodeError(data, out, err)
	}
	if strict && len(strictErrs) > 0 {
		return fmt.Errorf("strict decoding: %w", errors.Join(strictErrs...))
	}
	return nil
}

// describeDecodeError turns a decoding failure into a message in JSON
// terms: the field and the JSON type wanted there, or the position of a
// syntax error. The standard decoder, run again on a fresh value of out's
// type, supplies the details (its errors are exported types).
func describeDecodeError(data []byte, out any, err error) error {
	fresh := reflect.New(reflect.TypeOf(out).Elem()).Interface()
	stdErr := json.Unmarshal(data, fresh)
	var typeErr *json.UnmarshalTypeError
	if errors.As(stdErr, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "the response"
		}
		want := jsonType(typeErr.Type)
		if want == "a number" && strings.HasPrefix(typeErr.Value, "number") {
			// A number the field's type cannot hold (1e400, 1.5 for an integer).
			return fmt.Errorf("%s: %s is out of range of %s", field, typeErr.Value, typeErr.Type)
		}
		return fmt.Errorf("%s: want %s, got %s", field, want, typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(stdErr, &syntaxErr) {
		return fmt.Errorf("invalid JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	}
	return fmt.Errorf("invalid response: %w", err)
}

// jsonType names the JSON type that decodes into t.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a value"
}

// StrictByDefault reports whether responses of the given contract version
// are decoded strictly when the webhook does not say: v2 is strict, v1
// loose.
func StrictByDefault(version mcv1a1.HookVersion) bool {
	return version == mcv1a1.HookVersionV2
}
