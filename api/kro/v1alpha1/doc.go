// Package v1alpha1 holds the ResourceGraphDefinition API (group kro.run,
// version v1alpha1) in the shape kro's users write it: a cluster-scoped
// object whose spec.schema declares a new API kind in SimpleSchema and whose
// spec.resources list the objects each instance of that kind produces
// (templates with ${...} expressions, external references, includeWhen,
// readyWhen and forEach).
//
// Field names and JSON tags are kro's (kubernetes-sigs/kro,
// api/v1alpha1/resourcegraphdefinition_types.go), so an RGD written for kro
// decodes unchanged. The SimpleSchema, templates and status expressions are
// kept as raw JSON (runtime.RawExtension): the API server preserves them
// as written and pkg/rgd compiles them. Status carries the same fields as
// kro's except lastIssuedRevision, which belongs to kro's GraphRevision
// objects that dcontroller does not have.
//
// +kubebuilder:object:generate=true
// +groupName=kro.run
package v1alpha1
