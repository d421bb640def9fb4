// Package rgd compiles kro's ResourceGraphDefinition (api/kro/v1alpha1) into
// what dcontroller runs: the CustomResourceDefinition of the instance kind
// the RGD declares, and (as the package grows) the Operator controllers and
// pipelines that produce each instance's resources and status. The runtime
// runs those controllers like any other: it does not know they came from an
// RGD.
//
// The package is pure: it reads an RGD and returns objects and errors, with
// no client and no cluster. Every error is an *Error whose path points into
// the RGD (`spec.schema.spec.replicas: unknown type "strin"`).
//
// Schema (schema.go): kro's SimpleSchema, the compact field language of
// spec.schema.spec and spec.schema.types ("integer | default=1 minimum=1",
// "[]string", "map[string]Person", nested maps), becomes an OpenAPI v3
// structural schema with kro's markers (required, default, description,
// enum, minimum, maximum, pattern, minLength, maxLength, minItems,
// maxItems, uniqueItems, listType, listMapKey, immutable, validation). CRD
// builds the whole instance CRD: group (kro.run by default), version, kind
// and the names kro derives from it, scope, the status subresource, the
// status fields with kro's state and conditions, printer columns, short
// names and categories. docs/kro.md lists the markers and where the package
// differs from kro.
//
// Status types (statustypes.go): as kro does, each status expression is
// type-checked with declared types (schema from the instance's SimpleSchema
// with ObjectMeta, a built-in kind from its Go type in k8s.io/api, a custom
// kind dyn, a collection a list) and its CEL type becomes the status
// field's OpenAPI schema; a field a known type lacks is an error at the
// status field.
//
// Expressions (template.go, cel.go): ScanString finds kro's ${...} in a
// string (braces balanced outside CEL string literals, ${"${VAR}"} for a
// literal "${VAR}"); FindFields walks a template and returns each value
// holding one, with its path, as a standalone expression (the value keeps
// its CEL type) or a string template (one CEL concatenation). Env compiles
// them with the variables kro defines (schema, each resource id, forEach
// iterators, each) and the libraries kro declares: cel-go's extensions, the
// Kubernetes CEL libraries and kro's own functions (hash.*, json.*,
// random.*, merge, deepMerge, lists.*AtIndex, omit), which give kro's
// values; runtime.* is refused by name (RefusedFunctions). Evaluation is
// bounded by cel-go's cost limit and gives JSON values.
//
// Graph (graph.go): BuildGraph compiles every expression of an RGD's
// resources and status, checks what each place may reference, and orders
// the resources: a reference to another resource's observed state is an
// edge, the order is kro's (dependencies first, ties by declaration), a
// cycle is an error naming it. docs/kro.md has the tables.
package rgd
