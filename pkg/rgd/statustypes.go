package rgd

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiservercel "k8s.io/apiserver/pkg/cel"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/expression/celkro"
)

// Status field typing: as kro does, each spec.schema.status expression is
// type-checked against declared types and the CEL type it yields becomes
// the OpenAPI schema of its status field.
//
// The declared types are those the values have at run time, in their JSON
// form, so that what an expression is checked as is what it computes:
//
//   - schema: the instance, an object with apiVersion and kind (strings),
//     metadata (ObjectMeta; without namespace for a cluster-scoped kind) and
//     spec (the SimpleSchema's compiled schema: an object field an object
//     type with its fields, []T a list, map[string]T a map, an object
//     field of SimpleSchema type "object" dyn);
//   - a resource of a built-in kind (one client-go's scheme knows, by
//     group, version and kind): the object type derived from its Go type in
//     k8s.io/api, by the json tags of its fields; a collection (a forEach
//     resource, an externalRef with a selector) a list of it;
//   - a resource of any other kind (a CRD, unknown offline): dyn, or a list
//     of dyn for a collection.
//
// The Go types map as the API server encodes them: integers to int,
// floats to double, strings (and named string types) to string, []byte to
// string (base64), metav1.Time, MicroTime and Duration to string,
// resource.Quantity to string, intstr.IntOrString to dyn, slices to lists,
// maps with string keys to maps, structs (embedded ones inlined) to object
// types, anything with its own JSON encoding (RawExtension, FieldsV1, ...)
// to dyn, and a type met again inside itself to dyn.

// identPattern is a field name CEL can select with a dot.
var identPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// typed is a declared CEL type with the OpenAPI schema of its values.
type typed struct {
	decl   *apiservercel.DeclType
	schema *apiextensionsv1.JSONSchemaProps
}

var (
	dynTyped    = typed{apiservercel.DynType, &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: new(true)}}
	stringTyped = typed{apiservercel.StringType, &apiextensionsv1.JSONSchemaProps{Type: "string"}}
)

// goTypes caches the declared types of Go types, and the schemas of their
// object types by CEL type name, for the life of the process: Go types are
// fixed, so the cache is bounded by the kinds client-go's scheme knows.
var goTypes = struct {
	sync.Mutex
	byType  map[reflect.Type]typed
	objects map[string]*apiextensionsv1.JSONSchemaProps
}{byType: map[reflect.Type]typed{}, objects: map[string]*apiextensionsv1.JSONSchemaProps{}}

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
	durationType  = reflect.TypeFor[metav1.Duration]()
	quantityType  = reflect.TypeFor[resource.Quantity]()
	intOrStrType  = reflect.TypeFor[intstr.IntOrString]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	objectMeta    = reflect.TypeFor[metav1.ObjectMeta]()
)

// builtinType is the declared type of a built-in kind's objects, and
// whether the kind is built in.
func builtinType(gvk schema.GroupVersionKind) (typed, bool) {
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return typed{}, false
	}
	return goType(reflect.TypeOf(obj)), true
}

// goType is the declared type of Go type t (see above).
func goType(t reflect.Type) typed {
	goTypes.Lock()
	defer goTypes.Unlock()
	w := &goWalk{stack: map[reflect.Type]bool{}}
	return w.typeOf(t)
}

// goWalk derives the types of Go types; the caller holds goTypes' lock.
type goWalk struct {
	stack  map[reflect.Type]bool // struct types being built
	cycles int                   // times a struct type was met inside itself
}

func (w *goWalk) typeOf(t reflect.Type) typed {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if c, ok := goTypes.byType[t]; ok {
		return c
	}
	switch t {
	case timeType, microTimeType:
		return typed{apiservercel.StringType, &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}}
	case durationType:
		return stringTyped
	case quantityType:
		// The API server writes a quantity as a string; a CRD describes
		// one as int-or-string.
		return typed{apiservercel.StringType, &apiextensionsv1.JSONSchemaProps{XIntOrString: true}}
	case intOrStrType:
		return typed{apiservercel.DynType, &apiextensionsv1.JSONSchemaProps{XIntOrString: true}}
	}
	if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return dynTyped
	}
	switch t.Kind() {
	case reflect.Bool:
		return typed{apiservercel.BoolType, &apiextensionsv1.JSONSchemaProps{Type: "boolean"}}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return typed{apiservercel.IntType, &apiextensionsv1.JSONSchemaProps{Type: "integer"}}
	case reflect.Float32, reflect.Float64:
		return typed{apiservercel.DoubleType, &apiextensionsv1.JSONSchemaProps{Type: "number"}}
	case reflect.String:
		return stringTyped
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return typed{apiservercel.StringType, &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte"}}
		}
		return listOf(w.typeOf(t.Elem()))
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return dynTyped
		}
		return mapOf(w.typeOf(t.Elem()))
	case reflect.Struct:
		if w.stack[t] {
			w.cycles++
			return dynTyped
		}
		w.stack[t] = true
		before := w.cycles
		fields := map[string]*apiservercel.DeclField{}
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		w.fields(t, fields, props)
		delete(w.stack, t)
		name := strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
		out := objectOf(goTypes.objects, name, fields, props)
		if w.cycles == before {
			// A type built inside a cycle holds dyn where the cycle
			// closed, which depends on where the walk entered it.
			goTypes.byType[t] = out
		}
		return out
	}
	return dynTyped
}

// goFields adds the JSON fields of struct t (embedded structs inlined) to
// fields and props.
func (w *goWalk) fields(t reflect.Type, fields map[string]*apiservercel.DeclField, props map[string]apiextensionsv1.JSONSchemaProps) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && ft.Kind() == reflect.Struct && (f.Anonymous || strings.Contains(","+opts+",", ",inline,")) {
			w.fields(ft, fields, props)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ty := w.typeOf(f.Type)
		fields[name] = apiservercel.NewDeclField(name, ty.decl, false, nil, nil)
		props[name] = *ty.schema
	}
}

func listOf(e typed) typed {
	return typed{apiservercel.NewListType(e.decl, -1), &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: e.schema}}}
}

func mapOf(e typed) typed {
	return typed{apiservercel.NewMapType(apiservercel.StringType, e.decl, -1), &apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: e.schema}}}
}

// objectOf is the object type name with fields, its schema recorded in
// objects; an object with a field CEL cannot select with a dot (not an
// identifier) is dyn, as its fields can only be read by index.
func objectOf(objects map[string]*apiextensionsv1.JSONSchemaProps, name string, fields map[string]*apiservercel.DeclField, props map[string]apiextensionsv1.JSONSchemaProps) typed {
	for n := range fields {
		if !identPattern.MatchString(n) {
			return dynTyped
		}
	}
	s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	objects[name] = s
	return typed{apiservercel.NewObjectType(name, fields), s}
}

// statusTyper types the status expressions of one RGD. Its own object
// types (the instance's) are named under "rgd.schema" and kept in objects;
// the Go types' are in goTypes.
type statusTyper struct {
	objects map[string]*apiextensionsv1.JSONSchemaProps
}

// specType is the declared type of an instance value of schema s (the
// compiled SimpleSchema); name names its object types. Only the shape is
// kept for status schemas: types, properties, items, additional
// properties, int-or-string and preserve-unknown-fields (no defaults,
// validations, enums or required fields).
func (st *statusTyper) specType(s *apiextensionsv1.JSONSchemaProps, name string) typed {
	switch {
	case s == nil:
		return dynTyped
	case s.XIntOrString:
		return typed{apiservercel.DynType, &apiextensionsv1.JSONSchemaProps{XIntOrString: true}}
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields:
		return dynTyped
	}
	switch s.Type {
	case "string":
		return stringTyped
	case "integer":
		return typed{apiservercel.IntType, &apiextensionsv1.JSONSchemaProps{Type: "integer"}}
	case "number":
		return typed{apiservercel.DoubleType, &apiextensionsv1.JSONSchemaProps{Type: "number"}}
	case "boolean":
		return typed{apiservercel.BoolType, &apiextensionsv1.JSONSchemaProps{Type: "boolean"}}
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			return dynTyped
		}
		return listOf(st.specType(s.Items.Schema, name+".@items"))
	case "object":
		if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
			return mapOf(st.specType(ap.Schema, name+".@values"))
		}
		if len(s.Properties) == 0 {
			return dynTyped
		}
		fields := map[string]*apiservercel.DeclField{}
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		for k, p := range s.Properties {
			ty := st.specType(&p, name+"."+k)
			fields[k] = apiservercel.NewDeclField(k, ty.decl, false, nil, nil)
			props[k] = *ty.schema
		}
		return objectOf(st.objects, name, fields, props)
	}
	return dynTyped
}

// instanceType is the declared type of schema: the instance without its
// status (kro's rule), with the full ObjectMeta as its metadata, less
// namespace for a cluster-scoped kind.
func (st *statusTyper) instanceType(spec *apiextensionsv1.JSONSchemaProps, namespaced bool) typed {
	const root = "rgd.schema"
	meta := goType(objectMeta)
	if !namespaced {
		fields := map[string]*apiservercel.DeclField{}
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		for k, f := range meta.decl.Fields {
			if k != "namespace" {
				fields[k], props[k] = f, meta.schema.Properties[k]
			}
		}
		meta = objectOf(st.objects, root+".metadata", fields, props)
	}
	sp := st.specType(spec, root+".spec")
	fields := map[string]*apiservercel.DeclField{
		"apiVersion": apiservercel.NewDeclField("apiVersion", apiservercel.StringType, false, nil, nil),
		"kind":       apiservercel.NewDeclField("kind", apiservercel.StringType, false, nil, nil),
		"metadata":   apiservercel.NewDeclField("metadata", meta.decl, false, nil, nil),
		"spec":       apiservercel.NewDeclField("spec", sp.decl, false, nil, nil),
	}
	props := map[string]apiextensionsv1.JSONSchemaProps{
		"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": *meta.schema, "spec": *sp.schema,
	}
	return objectOf(st.objects, root, fields, props)
}

// schemaOf maps the CEL type of a status expression to the OpenAPI schema
// of the status field it fills, as kro does: bool to boolean, int and uint
// to integer, double to number, string to string, bytes to a string of
// format byte, timestamp to a string of format date-time, duration to a
// string, list(T) to an array of T, map(string, T) to an object whose
// additionalProperties are T (map(string, dyn) to an object keeping
// unknown fields), an object type declared here to its schema,
// optional(T) to T; dyn and anything else (null, a type parameter, an
// opaque type such as a Kubernetes quantity) to a field keeping any value
// (x-kubernetes-preserve-unknown-fields). A schema of more than
// MaxSchemaNodes nodes keeps any value too. The result is a fresh copy.
func (st *statusTyper) schemaOf(t *cel.Type) *apiextensionsv1.JSONSchemaProps {
	s := st.schemaOfType(t)
	if schemaNodes(s, MaxSchemaNodes) > MaxSchemaNodes {
		return dynTyped.schema.DeepCopy()
	}
	return s
}

func (st *statusTyper) schemaOfType(t *cel.Type) *apiextensionsv1.JSONSchemaProps {
	if t == nil {
		return dynTyped.schema.DeepCopy()
	}
	params := t.Parameters()
	switch t.Kind() {
	case types.BoolKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "boolean"}
	case types.IntKind, types.UintKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer"}
	case types.DoubleKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "number"}
	case types.StringKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	case types.BytesKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte"}
	case types.TimestampKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	case types.DurationKind:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}
	case types.ListKind:
		if len(params) == 1 {
			return &apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: st.schemaOfType(params[0])}}
		}
	case types.MapKind:
		if len(params) == 2 && params[0].Kind() == types.StringKind {
			v := st.schemaOfType(params[1])
			if v.XPreserveUnknownFields != nil && v.Type == "" {
				return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: new(true)}
			}
			return &apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: v}}
		}
	case types.StructKind:
		if s := st.objects[t.TypeName()]; s != nil {
			return s.DeepCopy()
		}
		goTypes.Lock()
		s := goTypes.objects[t.TypeName()]
		goTypes.Unlock()
		if s != nil {
			return s.DeepCopy()
		}
	case types.OpaqueKind:
		if t.TypeName() == "optional_type" && len(params) == 1 {
			return st.schemaOfType(params[0])
		}
	}
	return dynTyped.schema.DeepCopy()
}

// schemaNodes counts the nodes of s, stopping past limit.
func schemaNodes(s *apiextensionsv1.JSONSchemaProps, limit int) int {
	n := 0
	var walk func(s *apiextensionsv1.JSONSchemaProps)
	walk = func(s *apiextensionsv1.JSONSchemaProps) {
		if s == nil || n > limit {
			return
		}
		n++
		for _, p := range s.Properties {
			walk(&p)
		}
		if s.Items != nil {
			walk(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
	}
	walk(s)
	return n
}

// statusFieldSchemas type-checks the expressions of spec.schema.status
// (see above) and returns the schema of each field, by its path relative
// to the status (a.b["c.d"], as FindFields writes it). spec is the
// instance spec's compiled schema.
//
// An expression that fails the type check but compiles with every
// variable dyn is a typing error (a field a known kind does not have, a
// string template part that is not a string, an operator without an
// overload for the declared types): an *Error at the field's path, as in
// kro. Whatever fails either way (a bad id, an unknown identifier, a
// syntax error) is left to BuildGraph, which reports it with its own rule;
// such a field, and the fields of an RGD whose resources cannot be read,
// get no schema here (any value).
//
// The includeWhen and readyWhen expressions are checked in the same typed
// environment (readyWhen of a collection with each as one item): one whose
// type is known and is not bool (or optional bool) is an *Error at its
// path, as kro refuses it when the RGD is created.
func statusFieldSchemas(rgd *krov1a1.ResourceGraphDefinition, spec *apiextensionsv1.JSONSchemaProps, namespaced bool) (map[string]*apiextensionsv1.JSONSchemaProps, error) {
	in, err := graphInput(rgd)
	if err != nil {
		return nil, nil
	}
	var fields []TemplateField
	if in.Status != nil {
		status := make(map[string]any, len(in.Status))
		for k, v := range in.Status {
			if k != "conditions" {
				status[k] = v
			}
		}
		if fields, err = FindFields(status, ""); err != nil {
			return nil, nil
		}
	}
	hasConds := false
	for _, r := range in.Resources {
		hasConds = hasConds || len(r.IncludeWhen) > 0 || len(r.ReadyWhen) > 0
	}
	if len(fields) == 0 && !hasConds {
		return nil, nil
	}
	st := &statusTyper{objects: map[string]*apiextensionsv1.JSONSchemaProps{}}
	inst := st.instanceType(spec, namespaced)
	roots := []*apiservercel.DeclType{inst.decl}
	opts := []cel.EnvOption{cel.Variable(SchemaVar, inst.decl.CelType())}
	var decl Declarations
	index := map[string]int{}
	types := map[string]typed{} // of one object of each resource
	for i, r := range in.Resources {
		if _, dup := index[r.ID]; dup || !resourceIDPattern.MatchString(r.ID) || reservedNames[r.ID] {
			return nil, nil // BuildGraph refuses the id
		}
		index[r.ID] = i
		obj, collection := r.Template, len(r.ForEach) > 0
		if r.ExternalRef != nil {
			obj = r.ExternalRef
			if md, ok := obj["metadata"].(map[string]any); ok && md["selector"] != nil {
				collection = true
			}
		}
		av, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		ty := dynTyped
		if b, ok := builtinType(gvkOf(av, kind)); ok {
			ty = b
			roots = append(roots, b.decl)
		}
		types[r.ID] = ty
		if collection {
			ty = listOf(ty)
			decl.Collections = append(decl.Collections, r.ID)
		} else {
			decl.Resources = append(decl.Resources, r.ID)
		}
		opts = append(opts, cel.Variable(r.ID, ty.decl.CelType()))
	}
	base, err := celkro.Env()
	if err != nil {
		return nil, errorf(statusPath, "CEL environment: %v", err)
	}
	provider, err := apiservercel.NewDeclTypeProvider(roots...).EnvOptions(base.CELTypeProvider())
	if err != nil {
		return nil, errorf(statusPath, "CEL types: %v", err)
	}
	env, err := base.Extend(append(provider, opts...)...)
	if err != nil {
		return nil, errorf(statusPath, "CEL environment: %v", err)
	}
	if err := checkConditionTypes(env, in, types); err != nil {
		return nil, err
	}
	var untyped *Graph // every variable dyn, made on the first failure
	out := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, f := range fields {
		checked, iss := env.Compile(f.CEL())
		if iss == nil || iss.Err() == nil {
			out[f.Path] = st.schemaOf(checked.OutputType())
			continue
		}
		if untyped == nil {
			e, err := NewEnv(decl)
			if err != nil {
				return nil, nil
			}
			untyped = &Graph{Env: e}
		}
		// BuildGraph's check of a status field, less the types.
		path := joinRel(statusPath, f.Path)
		if _, _, err := untyped.compile(path, f.CEL(), scope{resources: true, noOmit: true}, index); err == nil {
			return nil, errorf(path, "type check: %s", issueText(iss))
		}
	}
	return out, nil
}

// checkConditionTypes type-checks each includeWhen and readyWhen in env
// (readyWhen of a collection with each bound to one item of types[id]): an
// expression that checks with a known type other than bool or
// optional(bool) is an *Error at its path (spec.resources[i].includeWhen[j]:
// must return a bool, got string). One that does not check is left to
// BuildGraph, which reports what is wrong with it by its own rules.
func checkConditionTypes(env *cel.Env, in GraphInput, types map[string]typed) error {
	check := func(env *cel.Env, path, src string) error {
		body, err := ParseStandalone(path, src)
		if err != nil {
			return nil
		}
		checked, iss := env.Compile(body)
		if iss != nil && iss.Err() != nil {
			return nil
		}
		return checkBool(path, &Expression{OutputType: checked.OutputType()})
	}
	for i, r := range in.Resources {
		p := Index("spec.resources", i)
		for j, src := range r.IncludeWhen {
			if err := check(env, Index(Field(p, "includeWhen"), j), src); err != nil {
				return err
			}
		}
		renv := env
		if len(r.ReadyWhen) > 0 && len(r.ForEach) > 0 {
			e, err := env.Extend(cel.Variable(EachVar, types[r.ID].decl.CelType()))
			if err != nil {
				return nil
			}
			renv = e
		}
		for j, src := range r.ReadyWhen {
			if err := check(renv, Index(Field(p, "readyWhen"), j), src); err != nil {
				return err
			}
		}
	}
	return nil
}
