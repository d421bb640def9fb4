package apiserver

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	extopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPI documents. Served kinds are schemaless: each kind's schema is an
// object with apiVersion, kind and the standard ObjectMeta, and
// x-kubernetes-preserve-unknown-fields for everything else, as a CRD without
// a structural schema would have. The documents list every path and
// operation (with x-kubernetes-group-version-kind and x-kubernetes-action)
// so kubectl finds the fieldValidation parameter (server-side field
// validation, no client-side fallback warning) and the patch types: JSON
// patch, merge patch and apply. Strategic merge patch is never advertised,
// so kubectl computes merge patches for views; for the built-in kinds of
// standalone mode it falls back to its compiled-in types, which the server
// accepts.

const (
	definitionsPrefix = "#/definitions/"
	componentsPrefix  = "#/components/schemas/"
)

var (
	objectMetaName = metav1.ObjectMeta{}.OpenAPIModelName()
	listMetaName   = metav1.ListMeta{}.OpenAPIModelName()
	statusName     = metav1.Status{}.OpenAPIModelName()
	deleteOptsName = metav1.DeleteOptions{}.OpenAPIModelName()
	patchName      = metav1.Patch{}.OpenAPIModelName()
)

// metaDefinitions returns the schemas of the meta.k8s.io types the served
// documents refer to, with their dependencies, referring to each other under
// prefix.
func metaDefinitions(prefix string) map[string]spec.Schema {
	all := extopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref { return spec.MustCreateRef(prefix + name) })
	out := map[string]spec.Schema{}
	var visit func(name string)
	visit = func(name string) {
		if _, done := out[name]; done {
			return
		}
		def, ok := all[name]
		if !ok {
			return
		}
		out[name] = def.Schema
		for _, ref := range schemaRefs(&def.Schema) {
			visit(strings.TrimPrefix(ref, prefix))
		}
	}
	for _, n := range []string{objectMetaName, listMetaName, statusName, deleteOptsName, patchName} {
		visit(n)
	}
	return out
}

// schemaRefs returns the $refs a schema uses, recursively.
func schemaRefs(s *spec.Schema) []string {
	var out []string
	var walk func(s *spec.Schema)
	walk = func(s *spec.Schema) {
		if s == nil {
			return
		}
		if r := s.Ref.String(); r != "" {
			out = append(out, r)
		}
		for _, p := range s.Properties {
			walk(&p)
		}
		if s.Items != nil {
			walk(s.Items.Schema)
			for i := range s.Items.Schemas {
				walk(&s.Items.Schemas[i])
			}
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
		for i := range s.AllOf {
			walk(&s.AllOf[i])
		}
		for i := range s.OneOf {
			walk(&s.OneOf[i])
		}
		for i := range s.AnyOf {
			walk(&s.AnyOf[i])
		}
	}
	walk(s)
	return out
}

// definitionName is the OpenAPI name of a served kind: the group reversed,
// the version and the kind ("io.dcontroller.view.op.v1alpha1.Summary"), as
// Kubernetes names CRD schemas.
func definitionName(gvk schema.GroupVersionKind) string {
	group := gvk.Group
	if group == "" {
		group = "core"
	}
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + gvk.Version + "." + gvk.Kind
}

func gvkExtension(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

func refSchema(ref string, description string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{
		Description: description,
		AllOf:       []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(ref)}}},
	}}
}

func stringSchema(description string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: description}}
}

// kindSchemas returns the schemas of a served kind and of its list.
func kindSchemas(r *resource, prefix string) map[string]spec.Schema {
	what := fmt.Sprintf("%s is a schemaless object", r.gvk.Kind)
	if r.view {
		what = fmt.Sprintf("%s is a view of operator %q: a schemaless, namespaced object held in memory by dcontroller", r.gvk.Kind,
			strings.TrimSuffix(r.gvk.Group, ".view.dcontroller.io"))
	} else {
		what += " in dcontroller's in-memory development store (standalone mode; the native schema is not enforced)"
	}
	obj := spec.Schema{
		SchemaProps: spec.SchemaProps{
			Description: what + ". Every field other than apiVersion, kind and metadata is free-form.",
			Type:        []string{"object"},
			Properties: map[string]spec.Schema{
				"apiVersion": stringSchema(metav1.TypeMeta{}.SwaggerDoc()["apiVersion"]),
				"kind":       stringSchema(metav1.TypeMeta{}.SwaggerDoc()["kind"]),
				"metadata":   refSchema(prefix+objectMetaName, "Standard object metadata."),
			},
		},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
			"x-kubernetes-preserve-unknown-fields": true,
			"x-kubernetes-group-version-kind":      []any{gvkExtension(r.gvk)},
		}},
	}
	listGVK := r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List")
	list := spec.Schema{
		SchemaProps: spec.SchemaProps{
			Description: fmt.Sprintf("%s is a list of %s.", listGVK.Kind, r.gvk.Kind),
			Type:        []string{"object"},
			Required:    []string{"items"},
			Properties: map[string]spec.Schema{
				"apiVersion": stringSchema(metav1.TypeMeta{}.SwaggerDoc()["apiVersion"]),
				"kind":       stringSchema(metav1.TypeMeta{}.SwaggerDoc()["kind"]),
				"metadata":   refSchema(prefix+listMetaName, "Standard list metadata."),
				"items": {SchemaProps: spec.SchemaProps{
					Type:  []string{"array"},
					Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(prefix + definitionName(r.gvk))}}},
				}},
			},
		},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
			"x-kubernetes-group-version-kind": []any{gvkExtension(listGVK)},
		}},
	}
	return map[string]spec.Schema{definitionName(r.gvk): obj, definitionName(listGVK): list}
}

// operation is one API operation, rendered into both OpenAPI versions.
type operation struct {
	method   string // get, post, put, patch, delete
	action   string // x-kubernetes-action: list, watch, get, post, put, patch, delete, deletecollection
	id       string
	query    []string
	body     string // definition the body refers to ("" for none)
	consumes []string
	response string // definition of the 200 response
}

type pathOps struct {
	path   string
	params []string // path parameters
	ops    []operation
}

var queryDescriptions = map[string]string{
	"labelSelector":        "A selector to restrict the list of returned objects by their labels.",
	"fieldSelector":        "A selector to restrict the list of returned objects by their fields: metadata.name and metadata.namespace.",
	"watch":                "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
	"resourceVersion":      "Where a watch starts: unset or \"0\" with the current state, otherwise after that version.",
	"resourceVersionMatch": "How resourceVersion applies to a list.",
	"allowWatchBookmarks":  "Request periodic BOOKMARK events carrying the latest resourceVersion.",
	"sendInitialEvents":    "Start the watch with the current state followed by a bookmark annotated k8s.io/initial-events-end.",
	"timeoutSeconds":       "Timeout for the list/watch call.",
	"limit":                "Ignored: lists are always complete.",
	"continue":             "Ignored: lists are always complete.",
	"dryRun":               "When present, indicates that modifications should not be persisted. The only valid value is All.",
	"fieldManager":         "A name associated with the actor or entity that is making these changes.",
	"fieldValidation":      "How the server treats unknown or duplicate fields: Ignore, Warn or Strict. Served objects are schemaless, so only duplicates are reported.",
	"force":                "Force is going to \"force\" Apply requests: re-acquire conflicting fields owned by other managers.",
	"pretty":               "If 'true', then the output is pretty printed.",
	"gracePeriodSeconds":   "Ignored: objects are deleted at once.",
	"propagationPolicy":    "Ignored: the store has no garbage collector.",
}

var (
	listQuery   = []string{"labelSelector", "fieldSelector", "watch", "resourceVersion", "resourceVersionMatch", "allowWatchBookmarks", "sendInitialEvents", "timeoutSeconds", "limit", "continue", "pretty"}
	writeQuery  = []string{"dryRun", "fieldManager", "fieldValidation", "pretty"}
	patchQuery  = []string{"dryRun", "fieldManager", "fieldValidation", "force", "pretty"}
	deleteQuery = []string{"dryRun", "gracePeriodSeconds", "propagationPolicy", "pretty"}
	patchTypes  = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
)

// resourcePaths returns the paths and operations of a served resource.
func resourcePaths(r *resource) []pathOps {
	prefix := "/apis/" + r.gvk.Group + "/" + r.gvk.Version
	if r.gvk.Group == "" {
		prefix = "/api/" + r.gvk.Version
	}
	name, list := definitionName(r.gvk), definitionName(r.gvk.GroupVersion().WithKind(r.gvk.Kind+"List"))
	suffix := r.gvk.Kind + "_" + strings.NewReplacer(".", "_", "-", "_").Replace(r.gvk.GroupVersion().String())
	scope, base, params := "", prefix+"/"+r.gvr.Resource, []string(nil)
	if r.namespaced {
		scope, base, params = "Namespaced", prefix+"/namespaces/{namespace}/"+r.gvr.Resource, []string{"namespace"}
	}
	out := []pathOps{{
		path: base, params: params,
		ops: []operation{
			{method: "get", action: "list", id: "list" + scope + suffix, query: listQuery, response: list},
			{method: "post", action: "post", id: "create" + scope + suffix, query: writeQuery, body: name, response: name},
			{method: "delete", action: "deletecollection", id: "deletecollection" + scope + suffix, query: append(append([]string{}, listQuery...), deleteQuery...), body: deleteOptsName, response: list},
		},
	}, {
		path: base + "/{name}", params: append(append([]string{}, params...), "name"),
		ops: []operation{
			{method: "get", action: "get", id: "read" + scope + suffix, query: []string{"pretty"}, response: name},
			{method: "put", action: "put", id: "replace" + scope + suffix, query: writeQuery, body: name, response: name},
			{method: "patch", action: "patch", id: "patch" + scope + suffix, query: patchQuery, body: patchName, consumes: patchTypes, response: name},
			{method: "delete", action: "delete", id: "delete" + scope + suffix, query: deleteQuery, body: deleteOptsName, response: name},
		},
	}}
	if r.namespaced {
		out = append(out, pathOps{path: prefix + "/" + r.gvr.Resource, ops: []operation{
			{method: "get", action: "list", id: "list" + suffix + "ForAllNamespaces", query: listQuery, response: list},
		}})
	}
	return out
}

// opExtensions returns the extensions of an operation of r:
// x-kubernetes-action and x-kubernetes-group-version-kind (the list kind
// for list). The maps are shared by the operations and documents of r and
// must not be modified.
func opExtensions(r *resource, op operation) spec.Extensions {
	r.extOnce.Do(func() {
		kind := gvkExtension(r.gvk)
		list := gvkExtension(r.gvk.GroupVersion().WithKind(r.gvk.Kind + "List"))
		r.ext = map[string]spec.Extensions{}
		for _, action := range []string{"list", "watch", "get", "post", "put", "patch", "delete", "deletecollection"} {
			gvk := kind
			if action == "list" {
				gvk = list
			}
			r.ext[action] = spec.Extensions{"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk}
		}
	})
	return r.ext[op.action]
}

// Shared parts of the documents. Everything but the names and schemas of
// a kind is the same for every kind, so the documents of all kinds refer
// to one copy of each (parameter lists, request bodies, media types)
// rather than each kind holding its own: with thousands of view kinds
// those copies were most of the server's memory. The shared values are
// never modified after they are built; their slices are clipped, so an
// append makes a new one.
var (
	v2Produces = []string{"application/json", "application/yaml"}
	v2Schemes  = []string{"https"}
	v2AnyType  = []string{"*/*"}
	// v2Query and v3Query hold each operation's query parameters, by the
	// first element of its query list and its length (the lists above
	// are fixed).
	v2PathParams = map[int][]spec.Parameter{}
	v3PathParams = map[int][]*spec3.Parameter{}
	v2Unauth     = spec.Response{ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}
	v3Unauth     = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}}
)

// queryLists are the distinct query lists of the operations, with the
// parameters of each in both versions, built once.
type queryList struct {
	names []string
	v2    []spec.Parameter
	v3    []*spec3.Parameter
	// v2Body holds, for the shared bodies (DeleteOptions, Patch), the
	// body parameter followed by the query parameters.
	v2Body map[string][]spec.Parameter
}

var queryLists = map[string]*queryList{}

func init() {
	for _, q := range [][]string{listQuery, writeQuery, patchQuery, deleteQuery, append(append([]string{}, listQuery...), deleteQuery...), {"pretty"}} {
		ql := &queryList{names: q, v2Body: map[string][]spec.Parameter{}}
		for _, name := range q {
			ql.v2 = append(ql.v2, spec.Parameter{
				ParamProps:   spec.ParamProps{Name: name, In: "query", Description: queryDescriptions[name]},
				SimpleSchema: spec.SimpleSchema{Type: queryType(name)},
			})
			ql.v3 = append(ql.v3, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
				Name: name, In: "query", Description: queryDescriptions[name],
				Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{queryType(name)}}},
			}})
		}
		ql.v2, ql.v3 = slices.Clip(ql.v2), slices.Clip(ql.v3)
		for _, body := range []string{deleteOptsName, patchName} {
			ql.v2Body[body] = slices.Clip(append([]spec.Parameter{v2BodyParam(body, false)}, ql.v2...))
		}
		queryLists[strings.Join(q, ",")] = ql
	}
	for n, names := range map[int][]string{1: {"namespace"}, 2: {"namespace", "name"}, 3: {"name"}} {
		var p2 []spec.Parameter
		var p3 []*spec3.Parameter
		for _, name := range names {
			p2 = append(p2, spec.Parameter{
				ParamProps:   spec.ParamProps{Name: name, In: "path", Required: true, Description: name + " of the object"},
				SimpleSchema: spec.SimpleSchema{Type: "string"},
			})
			p3 = append(p3, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
				Name: name, In: "path", Required: true, Description: name + " of the object",
				Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
			}})
		}
		v2PathParams[n], v3PathParams[n] = slices.Clip(p2), slices.Clip(p3)
	}
}

// pathParamsKey is the key of a path's parameters in v2PathParams and
// v3PathParams (0: none).
func pathParamsKey(params []string) int {
	switch strings.Join(params, ",") {
	case "namespace":
		return 1
	case "namespace,name":
		return 2
	case "name":
		return 3
	}
	return 0
}

func queryListOf(q []string) *queryList {
	ql := queryLists[strings.Join(q, ",")]
	if ql == nil {
		panic(fmt.Sprintf("apiserver: query list %v not prepared", q))
	}
	return ql
}

func v2BodyParam(def string, required bool) spec.Parameter {
	return spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: required,
		Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(definitionsPrefix + def)}}}}
}

// swaggerV2 builds the /openapi/v2 document of every served resource.
func swaggerV2(resources []*resource) *spec.Swagger {
	sw := &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "dcontroller view API server", Version: "v1alpha1"}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
	for n, d := range metaDefinitions(definitionsPrefix) {
		sw.Definitions[n] = d
	}
	for _, r := range resources {
		for n, d := range kindSchemas(r, definitionsPrefix) {
			sw.Definitions[n] = d
		}
		// The responses and the parameters with the kind's own body are
		// shared by the operations of the kind.
		responses := map[string]*spec.Responses{}
		kindBody := map[string][]spec.Parameter{}
		for _, p := range resourcePaths(r) {
			item := spec.PathItem{}
			item.Parameters = v2PathParams[pathParamsKey(p.params)]
			for _, op := range p.ops {
				resp := responses[op.response]
				if resp == nil {
					resp = &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
						200: {ResponseProps: spec.ResponseProps{Description: "OK",
							Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(definitionsPrefix + op.response)}}}},
						401: v2Unauth,
					}}}
					responses[op.response] = resp
				}
				o := &spec.Operation{
					VendorExtensible: spec.VendorExtensible{Extensions: opExtensions(r, op)},
					OperationProps: spec.OperationProps{
						ID:        op.id,
						Consumes:  op.consumes,
						Produces:  v2Produces,
						Schemes:   v2Schemes,
						Responses: resp,
					},
				}
				if o.Consumes == nil {
					o.Consumes = v2AnyType
				}
				ql := queryListOf(op.query)
				switch {
				case op.body == "":
					o.Parameters = ql.v2
				case ql.v2Body[op.body] != nil && op.method == "delete":
					o.Parameters = ql.v2Body[op.body]
				default:
					key := op.body + "/" + op.method + "/" + strings.Join(op.query, ",")
					if kindBody[key] == nil {
						kindBody[key] = slices.Clip(append([]spec.Parameter{v2BodyParam(op.body, op.method != "delete")}, ql.v2...))
					}
					o.Parameters = kindBody[key]
				}
				switch op.method {
				case "get":
					item.Get = o
				case "post":
					item.Post = o
				case "put":
					item.Put = o
				case "patch":
					item.Patch = o
				case "delete":
					item.Delete = o
				}
			}
			sw.Paths.Paths[p.path] = item
		}
	}
	return sw
}

func queryType(q string) string {
	switch q {
	case "watch", "allowWatchBookmarks", "sendInitialEvents", "force":
		return "boolean"
	case "timeoutSeconds", "limit", "gracePeriodSeconds":
		return "integer"
	}
	return "string"
}

// v3Bodies holds the request bodies that refer to shared definitions, by
// definition, content types and whether required.
var (
	v3BodiesMu sync.Mutex
	v3Bodies   = map[string]*spec3.RequestBody{}
)

func v3Body(def string, consumes []string, required bool) *spec3.RequestBody {
	bodySchema := &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(componentsPrefix + def)}}
	content := map[string]*spec3.MediaType{}
	if consumes == nil {
		consumes = v2AnyType
	}
	media := &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: bodySchema}}
	for _, ct := range consumes {
		content[ct] = media
	}
	return &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Content: content, Required: required}}
}

// sharedV3Body returns the request body of a shared definition, built
// once.
func sharedV3Body(def string, consumes []string, required bool) *spec3.RequestBody {
	key := fmt.Sprintf("%s/%v/%t", def, consumes, required)
	v3BodiesMu.Lock()
	defer v3BodiesMu.Unlock()
	b := v3Bodies[key]
	if b == nil {
		b = v3Body(def, consumes, required)
		v3Bodies[key] = b
	}
	return b
}

// openAPIV3 builds the /openapi/v3 document of one group/version.
func openAPIV3(gv schema.GroupVersion, resources []*resource) *spec3.OpenAPI {
	doc := &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       &spec.Info{InfoProps: spec.InfoProps{Title: "dcontroller view API server", Version: gv.Version}},
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{}},
	}
	for n, d := range metaDefinitions(componentsPrefix) {
		d := d
		doc.Components.Schemas[n] = &d
	}
	for _, r := range resources {
		for n, d := range kindSchemas(r, componentsPrefix) {
			d := d
			doc.Components.Schemas[n] = &d
		}
		responses := map[string]*spec3.Responses{}
		bodies := map[string]*spec3.RequestBody{}
		for _, p := range resourcePaths(r) {
			path := &spec3.Path{}
			path.Parameters = v3PathParams[pathParamsKey(p.params)]
			for _, op := range p.ops {
				resp := responses[op.response]
				if resp == nil {
					media := &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{
						Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(componentsPrefix + op.response)}}}}
					resp = &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
						200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: map[string]*spec3.MediaType{
							"application/json": media,
							"application/yaml": media,
						}}},
						401: v3Unauth,
					}}}
					responses[op.response] = resp
				}
				o := &spec3.Operation{
					VendorExtensible: spec.VendorExtensible{Extensions: opExtensions(r, op)},
					OperationProps: spec3.OperationProps{
						OperationId: op.id,
						Responses:   resp,
						Parameters:  queryListOf(op.query).v3,
					},
				}
				if op.body != "" {
					required := op.method != "delete"
					if op.body == deleteOptsName || op.body == patchName {
						o.RequestBody = sharedV3Body(op.body, op.consumes, required)
					} else {
						key := fmt.Sprintf("%s/%v/%t", op.body, op.consumes, required)
						if bodies[key] == nil {
							bodies[key] = v3Body(op.body, op.consumes, required)
						}
						o.RequestBody = bodies[key]
					}
				}
				switch op.method {
				case "get":
					path.Get = o
				case "post":
					path.Post = o
				case "put":
					path.Put = o
				case "patch":
					path.Patch = o
				case "delete":
					path.Delete = o
				}
			}
			doc.Paths.Paths[p.path] = path
		}
	}
	return doc
}

// openAPIV3Key is the key of a group/version in /openapi/v3:
// "apis/<group>/<version>" or "api/v1".
func openAPIV3Key(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func sortedResources(m map[schema.GroupVersionResource]*resource) []*resource {
	out := make([]*resource, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gvr.String() < out[j].gvr.String() })
	return out
}
