package rgd

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gobuffalo/flect"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
)

// Paths of the schema's parts in an RGD, the roots of the errors below.
const (
	schemaPath = "spec.schema"
	specPath   = "spec.schema.spec"
	typesPath  = "spec.schema.types"
	statusPath = "spec.schema.status"
)

// MaxSchemaNodes bounds the size of one generated instance schema, counted
// in OpenAPI schema nodes (one per field, element or value type). Custom
// types are expanded inline, so types that use each other several times
// can grow exponentially; past the bound, compiling is an error.
const MaxSchemaNodes = 20000

var (
	kindPattern    = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*$`)
	versionPattern = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]+)?$`)
)

// InstanceKind is the API kind an RGD declares, named as kro names it: the
// plural is the English plural of the lower-cased kind (flect, as kro),
// the singular the lower-cased kind, the list kind <Kind>List.
type InstanceKind struct {
	schema.GroupVersionKind
	Plural     string
	Singular   string
	Namespaced bool
}

// Resource is the instance kind's group, version and plural resource.
func (k InstanceKind) Resource() schema.GroupVersionResource {
	return k.GroupVersion().WithResource(k.Plural)
}

// Instance returns the instance kind of an RGD schema. The kind must be
// UpperCamelCase, apiVersion a Kubernetes version (v1, v1alpha1, v2beta3),
// group empty (kro.run) or a DNS subdomain with a dot, scope empty,
// Namespaced or Cluster; each violation is an *Error at its field.
func Instance(s *krov1a1.Schema) (InstanceKind, error) {
	if s == nil {
		return InstanceKind{}, errorf(schemaPath, "schema is required")
	}
	if !kindPattern.MatchString(s.Kind) || len(s.Kind) > 63 {
		return InstanceKind{}, errorf(Field(schemaPath, "kind"), "kind %q must be UpperCamelCase letters and digits (at most 63)", s.Kind)
	}
	if !versionPattern.MatchString(s.APIVersion) {
		return InstanceKind{}, errorf(Field(schemaPath, "apiVersion"), "apiVersion %q must be a Kubernetes version such as v1, v1alpha1 or v2beta1", s.APIVersion)
	}
	group := s.Group
	if group == "" {
		group = krov1a1.GroupName
	}
	if msgs := validation.IsDNS1123Subdomain(group); len(msgs) > 0 || !strings.Contains(group, ".") {
		return InstanceKind{}, errorf(Field(schemaPath, "group"), "group %q must be a DNS subdomain with at least one dot", group)
	}
	k := InstanceKind{
		GroupVersionKind: schema.GroupVersionKind{Group: group, Version: s.APIVersion, Kind: s.Kind},
		Singular:         strings.ToLower(s.Kind),
		Plural:           flect.Pluralize(strings.ToLower(s.Kind)),
	}
	switch s.Scope {
	case "", krov1a1.ResourceScopeNamespaced:
		k.Namespaced = true
	case krov1a1.ResourceScopeCluster:
	default:
		return InstanceKind{}, errorf(Field(schemaPath, "scope"), "scope %q must be Namespaced or Cluster", s.Scope)
	}
	return k, nil
}

// CRD compiles the schema of an RGD into the CustomResourceDefinition of
// its instance kind, as kro generates it: named <plural>.<group>, one
// served and stored version with the status subresource, an OpenAPI schema
// with apiVersion, kind, metadata, the spec compiled from SimpleSchema
// (spec.schema.spec with spec.schema.types) and the status (see
// StatusSchema), the printer columns of spec.schema.additionalPrinterColumns
// or else State, Ready and Age, the short names and categories, and the
// labels and annotations of spec.schema.metadata. The CRD is checked with
// the API server's own CRD validation, so a schema the API server would
// refuse (a default that fails its own pattern or enum, a validation rule
// that does not compile, a list-map key neither required nor defaulted)
// fails here. Errors are *Error with the path of the field at fault.
func CRD(rgd *krov1a1.ResourceGraphDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	s := rgd.Spec.Schema
	ik, err := Instance(s)
	if err != nil {
		return nil, err
	}
	spec, err := SpecSchema(s.Spec, s.Types)
	if err != nil {
		return nil, err
	}
	fieldTypes, err := statusFieldSchemas(rgd, spec, ik.Namespaced)
	if err != nil {
		return nil, err
	}
	status, err := StatusSchema(s.Status, fieldTypes)
	if err != nil {
		return nil, err
	}
	columns := s.AdditionalPrinterColumns
	if len(columns) == 0 {
		columns = defaultColumns()
	}
	scope := apiextensionsv1.NamespaceScoped
	if !ik.Namespaced {
		scope = apiextensionsv1.ClusterScoped
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: ik.Plural + "." + ik.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: ik.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:       ik.Kind,
				ListKind:   ik.Kind + "List",
				Plural:     ik.Plural,
				Singular:   ik.Singular,
				ShortNames: slices.Clone(s.ShortNames),
				Categories: slices.Clone(s.Categories),
			},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    ik.Version,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       *spec,
						"status":     *status,
					},
				}},
				Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				AdditionalPrinterColumns: slices.Clone(columns),
			}},
		},
	}
	if m := s.Metadata; m != nil {
		if len(m.Labels) > 0 {
			crd.Labels = make(map[string]string, len(m.Labels))
			for k, v := range m.Labels {
				crd.Labels[k] = v
			}
		}
		if len(m.Annotations) > 0 {
			crd.Annotations = make(map[string]string, len(m.Annotations))
			for k, v := range m.Annotations {
				crd.Annotations[k] = v
			}
		}
	}
	if err := validateCRD(crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// defaultColumns are the instance kind's printer columns when the RGD
// names none: the state, the Ready condition and the age.
func defaultColumns() []apiextensionsv1.CustomResourceColumnDefinition {
	return []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "State", Type: "string", JSONPath: ".status.state", Description: "The instance's state: ACTIVE, IN_PROGRESS, DELETING or ERROR"},
		{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`, Description: "The status of the instance's Ready condition"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp", Description: "Time since the instance was created"},
	}
}

// conditionsSchema is the schema of an instance's status.conditions, as
// kro's CRDs have it: a list of objects with type, status, reason,
// message, lastTransitionTime (strings) and observedGeneration (integer).
func conditionsSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type: "array",
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"type":               {Type: "string"},
				"status":             {Type: "string"},
				"reason":             {Type: "string"},
				"message":            {Type: "string"},
				"lastTransitionTime": {Type: "string"},
				"observedGeneration": {Type: "integer"},
			},
		}},
	}
}

// StatusSchema compiles spec.schema.status (raw JSON: a map, nested as the
// instance status is, whose leaves are ${...} expressions) into the schema
// of the instance status. A nested map becomes an object with the same
// properties; every other value is a field whose schema is fields[path],
// path relative to the status as FindFields writes it (a.b["c.d"]): the
// schema of its expression's type (CRD computes them, see
// statusFieldSchemas). A field fields has no schema for keeps any JSON
// value (x-kubernetes-preserve-unknown-fields); fields may be nil. state
// (a string) and conditions (kro's condition list) are always there and
// replace fields of the same names: kro writes them. A conditions entry in
// the RGD must be a list of ${...} strings. A value with no ${...} in it
// is an error, as in kro.
func StatusSchema(raw runtime.RawExtension, fields map[string]*apiextensionsv1.JSONSchemaProps) (*apiextensionsv1.JSONSchemaProps, error) {
	m, err := decodeMap(raw, statusPath)
	if err != nil {
		return nil, err
	}
	if c, ok := m["conditions"]; ok {
		list, ok := c.([]any)
		if !ok {
			return nil, errorf(Field(statusPath, "conditions"), "conditions must be a list of ${...} expressions, got %s", jsonKind(c))
		}
		for i, e := range list {
			if s, ok := e.(string); !ok || !strings.Contains(s, "${") {
				return nil, errorf(Index(Field(statusPath, "conditions"), i), "a condition must be a ${...} expression, got %s", jsonKind(e))
			}
		}
		delete(m, "conditions")
	}
	st, err := statusObject(m, statusPath, "", fields)
	if err != nil {
		return nil, err
	}
	st.Properties["state"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	st.Properties["conditions"] = conditionsSchema()
	return st, nil
}

func statusObject(m map[string]any, path, rel string, fields map[string]*apiextensionsv1.JSONSchemaProps) (*apiextensionsv1.JSONSchemaProps, error) {
	out := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	for _, k := range sortedKeys(m) {
		p, r := Field(path, k), Field(rel, k)
		switch v := m[k].(type) {
		case map[string]any:
			sub, err := statusObject(v, p, r, fields)
			if err != nil {
				return nil, err
			}
			out.Properties[k] = *sub
		default:
			if !hasExpression(v) {
				return nil, errorf(p, "a status field must hold a ${...} expression, got %s", jsonKind(v))
			}
			if t := fields[r]; t != nil {
				out.Properties[k] = *t
			} else {
				out.Properties[k] = apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true)}
			}
		}
	}
	return out, nil
}

// hasExpression reports whether a status value holds a ${...} somewhere.
func hasExpression(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, "${")
	case []any:
		return slices.ContainsFunc(v, hasExpression)
	case map[string]any:
		for _, e := range v {
			if hasExpression(e) {
				return true
			}
		}
	}
	return false
}

// SpecSchema compiles the SimpleSchema of an instance spec (spec, raw
// JSON: a map from field name to a field string or a nested map) with the
// custom types of types (raw JSON: a map from type name to a field string,
// an alias, or a map of fields) into an OpenAPI v3 structural schema.
//
// Types: string, integer, boolean, float (OpenAPI number; number is
// accepted too), object (any object, unknown fields kept), []T,
// map[string]T, a custom type's name, and nested maps (objects with those
// properties). Custom types may use each other, without cycles, and are
// expanded inline. Markers are applied in order (see docs/kro.md). An
// object none of whose fields is required gets default {} when one of its
// fields has a default, so the API server fills the defaults in even when
// the object is left out (kro does the same). Errors are *Error at
// spec.schema.spec.<field> or spec.schema.types.<Type>.<field>.
func SpecSchema(spec, types runtime.RawExtension) (*apiextensionsv1.JSONSchemaProps, error) {
	specMap, err := decodeMap(spec, specPath)
	if err != nil {
		return nil, err
	}
	typesMap, err := decodeMap(types, typesPath)
	if err != nil {
		return nil, err
	}
	c := &compiler{defs: typesMap, types: map[string]*customType{}}
	for _, name := range sortedKeys(typesMap) {
		if _, err := c.resolve(name, nil); err != nil {
			return nil, err
		}
	}
	return c.object(specMap, specPath)
}

// customType is a compiled entry of spec.schema.types.
type customType struct {
	schema   *apiextensionsv1.JSONSchemaProps
	required bool // an alias written with required=true
	nodes    int  // schema nodes in schema
}

type compiler struct {
	defs  map[string]any
	types map[string]*customType
	nodes int
}

// count charges n schema nodes to the schema being built.
func (c *compiler) count(n int, path string) error {
	c.nodes += n
	if c.nodes > MaxSchemaNodes {
		return errorf(path, "the instance schema exceeds %d schema nodes (custom types are expanded inline)", MaxSchemaNodes)
	}
	return nil
}

// resolve compiles the custom type name once, after the types it uses;
// stack holds the types being compiled, to name a cycle.
func (c *compiler) resolve(name string, stack []string) (*customType, error) {
	if t, ok := c.types[name]; ok {
		if t == nil {
			cycle := append(slices.Clone(stack[max(slices.Index(stack, name), 0):]), name)
			return nil, errorf(Field(typesPath, cycle[0]), "custom types form a cycle: %s", strings.Join(cycle, " -> "))
		}
		return t, nil
	}
	def, ok := c.defs[name]
	if !ok {
		return nil, nil
	}
	c.types[name] = nil // in progress
	stack = append(stack, name)
	path := Field(typesPath, name)
	before := c.nodes
	t := &customType{}
	switch d := def.(type) {
	case string:
		parent := &apiextensionsv1.JSONSchemaProps{}
		s, err := c.fieldString(d, name, parent, path, stack)
		if err != nil {
			return nil, err
		}
		t.schema, t.required = s, len(parent.Required) > 0
	case map[string]any:
		s, err := c.objectIn(d, path, stack)
		if err != nil {
			return nil, err
		}
		t.schema = s
	default:
		return nil, errorf(path, "a type must be a type string or a map of fields, got %s", jsonKind(def))
	}
	t.nodes = c.nodes - before
	c.nodes = before // charged again at each use
	c.types[name] = t
	return t, nil
}

func (c *compiler) object(m map[string]any, path string) (*apiextensionsv1.JSONSchemaProps, error) {
	return c.objectIn(m, path, nil)
}

// objectIn compiles a map of fields into an object schema.
func (c *compiler) objectIn(m map[string]any, path string, stack []string) (*apiextensionsv1.JSONSchemaProps, error) {
	if err := c.count(1, path); err != nil {
		return nil, err
	}
	out := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	childDefault := false
	for _, k := range sortedKeys(m) {
		p := Field(path, k)
		var (
			s   *apiextensionsv1.JSONSchemaProps
			err error
		)
		switch v := m[k].(type) {
		case string:
			s, err = c.fieldString(v, k, out, p, stack)
		case map[string]any:
			s, err = c.objectIn(v, p, stack)
		default:
			err = errorf(p, "a field must be a type string or a map of fields, got %s", jsonKind(v))
		}
		if err != nil {
			return nil, err
		}
		out.Properties[k] = *s
		childDefault = childDefault || s.Default != nil
	}
	sort.Strings(out.Required)
	out.Required = slices.Compact(out.Required)
	if childDefault && len(out.Required) == 0 {
		out.Default = &apiextensionsv1.JSON{Raw: []byte("{}")}
	}
	return out, nil
}

// fieldString compiles the field string of field name (at path) into its
// schema; required=true (or a required alias) adds name to parent.Required.
func (c *compiler) fieldString(s, name string, parent *apiextensionsv1.JSONSchemaProps, path string, stack []string) (*apiextensionsv1.JSONSchemaProps, error) {
	f, err := parseField(s)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	sch, required, err := c.typeSchema(f.typ, path, stack)
	if err != nil {
		return nil, err
	}
	if required {
		parent.Required = append(parent.Required, name)
	}
	for _, m := range f.markers {
		if err := applyMarker(sch, m, name, parent); err != nil {
			return nil, errorf(path, "marker %s: %w", m.key, err)
		}
	}
	if len(sch.XListMapKeys) > 0 && (sch.XListType == nil || *sch.XListType != "map") {
		return nil, errorf(path, "listMapKey needs listType=map")
	}
	return sch, nil
}

// typeSchema is the schema of a parsed type; required reports a custom
// alias written with required=true.
func (c *compiler) typeSchema(t *ssType, path string, stack []string) (*apiextensionsv1.JSONSchemaProps, bool, error) {
	switch t.kind {
	case kindAtomic:
		return &apiextensionsv1.JSONSchemaProps{Type: t.name}, false, c.count(1, path)
	case kindObject:
		return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}, false, c.count(1, path)
	case kindSlice, kindMap:
		elem, _, err := c.typeSchema(t.elem, path, stack)
		if err != nil {
			return nil, false, err
		}
		if err := c.count(1, path); err != nil {
			return nil, false, err
		}
		if t.kind == kindSlice {
			return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: elem}}, false, nil
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: elem}}, false, nil
	}
	ct, err := c.resolve(t.name, stack)
	if err != nil {
		return nil, false, err
	}
	if ct == nil {
		if t.name == "number" { // OpenAPI's name of float
			return &apiextensionsv1.JSONSchemaProps{Type: "number"}, false, c.count(1, path)
		}
		return nil, false, errorf(path, "unknown type %q", t.name)
	}
	if err := c.count(ct.nodes, path); err != nil {
		return nil, false, err
	}
	return ct.schema.DeepCopy(), ct.required, nil
}

// applyMarker applies one marker to the schema of field name; required
// goes to the parent's list.
func applyMarker(s *apiextensionsv1.JSONSchemaProps, m marker, name string, parent *apiextensionsv1.JSONSchemaProps) error {
	switch m.key {
	case "required":
		b, err := strconv.ParseBool(m.value)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", m.value)
		}
		if b {
			parent.Required = append(parent.Required, name)
		}
	case "immutable":
		b, err := strconv.ParseBool(m.value)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", m.value)
		}
		if b {
			s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: "self == oldSelf", Message: "field is immutable"})
		}
	case "validation":
		if strings.TrimSpace(m.value) == "" {
			return errors.New("empty CEL rule")
		}
		s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{Rule: m.value, Message: "validation failed"})
	case "description":
		s.Description = m.value
	case "default":
		raw, err := defaultValue(s.Type, m.value)
		if err != nil {
			return err
		}
		s.Default = &apiextensionsv1.JSON{Raw: raw}
	case "minimum", "maximum":
		f, err := strconv.ParseFloat(m.value, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("want a finite number, got %q", m.value)
		}
		if m.key == "minimum" {
			s.Minimum = &f
		} else {
			s.Maximum = &f
		}
	case "enum":
		return applyEnum(s, m.value)
	case "pattern":
		if s.Type != "string" {
			return fmt.Errorf("applies to strings, not %s", typeName(s))
		}
		if m.value == "" {
			return errors.New("empty pattern")
		}
		if _, err := regexp.Compile(m.value); err != nil {
			return fmt.Errorf("invalid regular expression: %w", err)
		}
		s.Pattern = m.value
	case "minLength", "maxLength":
		if s.Type != "string" {
			return fmt.Errorf("applies to strings, not %s", typeName(s))
		}
		n, err := count(m.value)
		if err != nil {
			return err
		}
		if m.key == "minLength" {
			s.MinLength = &n
		} else {
			s.MaxLength = &n
		}
	case "minItems", "maxItems":
		if s.Type != "array" {
			return fmt.Errorf("applies to lists, not %s", typeName(s))
		}
		n, err := count(m.value)
		if err != nil {
			return err
		}
		if m.key == "minItems" {
			s.MinItems = &n
		} else {
			s.MaxItems = &n
		}
	case "uniqueItems":
		if s.Type != "array" {
			return fmt.Errorf("applies to lists, not %s", typeName(s))
		}
		b, err := strconv.ParseBool(m.value)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", m.value)
		}
		if b {
			// The API server refuses uniqueItems; a set list is how a CRD
			// says its items are unique.
			if s.XListType != nil && *s.XListType != "set" {
				return fmt.Errorf("a unique list must have listType set, not %s", *s.XListType)
			}
			s.XListType = new("set")
		}
	case "listType":
		if s.Type != "array" {
			return fmt.Errorf("applies to lists, not %s", typeName(s))
		}
		if m.value != "atomic" && m.value != "set" && m.value != "map" {
			return fmt.Errorf("want atomic, set or map, got %q", m.value)
		}
		if s.XListType != nil && *s.XListType != m.value {
			return fmt.Errorf("listType %s contradicts the list's listType %s (set by uniqueItems=true or an earlier listType)", m.value, *s.XListType)
		}
		s.XListType = new(m.value)
	case "listMapKey":
		if s.Type != "array" {
			return fmt.Errorf("applies to lists, not %s", typeName(s))
		}
		if slices.Contains(s.XListMapKeys, m.value) {
			return fmt.Errorf("duplicate key %q", m.value)
		}
		s.XListMapKeys = append(s.XListMapKeys, m.value)
	}
	return nil
}

// defaultValue is the JSON of a default marker's value for a field of
// OpenAPI type typ: a string default is the value itself (quoted or not),
// a number, integer or boolean is parsed and written canonically, any
// other type's default is JSON of that type.
func defaultValue(typ, v string) ([]byte, error) {
	switch typ {
	case "string":
		return json.Marshal(v)
	case "integer":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %q", v)
		}
		return []byte(strconv.FormatInt(n, 10)), nil
	case "number":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("want a finite number, got %q", v)
		}
		return json.Marshal(f)
	case "boolean":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", v)
		}
		return []byte(strconv.FormatBool(b)), nil
	}
	var x any
	if err := json.Unmarshal([]byte(v), &x); err != nil {
		return nil, fmt.Errorf("want a JSON value, got %q", v)
	}
	switch x.(type) {
	case []any:
		if typ != "array" {
			return nil, fmt.Errorf("a list is no default for an %s", typ)
		}
	case map[string]any:
		if typ != "object" {
			return nil, fmt.Errorf("an object is no default for an %s", typ)
		}
	default:
		if typ == "array" || typ == "object" {
			return nil, fmt.Errorf("want a JSON %s, got %q", map[string]string{"array": "list", "object": "object"}[typ], v)
		}
	}
	return json.Marshal(x)
}

// applyEnum sets the allowed values of a string or integer field from a
// comma-separated list (spaces around the values are dropped).
func applyEnum(s *apiextensionsv1.JSONSchemaProps, v string) error {
	if s.Type != "string" && s.Type != "integer" {
		return fmt.Errorf("applies to strings and integers, not %s", typeName(s))
	}
	var out []apiextensionsv1.JSON
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			return fmt.Errorf("empty value in %q", v)
		}
		raw, err := defaultValue(s.Type, e)
		if err != nil {
			return err
		}
		out = append(out, apiextensionsv1.JSON{Raw: raw})
	}
	s.Enum = out
	return nil
}

// count parses a length or item count: a non-negative integer.
func count(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a non-negative integer, got %q", v)
	}
	return n, nil
}

// typeName names a schema's type for errors.
func typeName(s *apiextensionsv1.JSONSchemaProps) string {
	switch {
	case s.Type == "array":
		return "a list"
	case s.Type == "object" && s.AdditionalProperties != nil:
		return "a map"
	case s.Type == "":
		return "an untyped field"
	case s.Type == "integer" || s.Type == "object":
		return "an " + s.Type
	}
	return "a " + s.Type
}

// decodeMap decodes a raw SimpleSchema part: absent or null is an empty
// map, anything but a JSON object an error at path.
func decodeMap(raw runtime.RawExtension, path string) (map[string]any, error) {
	if len(raw.Raw) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return nil, errorf(path, "not JSON: %v", err)
	}
	switch v := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	default:
		return nil, errorf(path, "must be a map of fields, got %s", jsonKind(v))
	}
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %t", v)
	case float64:
		return "the number " + strconv.FormatFloat(v, 'g', -1, 64)
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
