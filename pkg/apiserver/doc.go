// Package apiserver is the embedded view API server: it serves the objects of
// a view.Store to any Kubernetes client (kubectl get/watch/apply/patch/delete)
// through k8s.io/apiserver.
//
// It runs a generic API server (genericapiserver) whose filter chain does
// authentication, authorization, request parsing and timeouts, and plugs a
// handler into its mux for /apis/<group>/... (and /api/v1/... in standalone
// mode). The handler resolves the request to a served resource and calls the
// library's REST handlers (GetResource, ListResource, CreateResource,
// UpdateResource, PatchResource, DeleteResource, DeleteCollection) on a
// storage that implements the rest.Storage interfaces over the view store.
//
// Served kinds are schemaless and held as unstructured objects. A view of
// operator <op> is served in group <op>.view.dcontroller.io, version
// v1alpha1, namespaced, as resource ResourceName(kind). Discovery (/apis,
// both the legacy and the aggregated form) and the OpenAPI v2/v3 documents
// follow the kinds live: a kind appears when the store holds an object of it
// or Options.Kinds lists it (the views of the running operators), and
// disappears when neither is true any longer.
//
// In standalone mode (Options.ServeNativeKinds) built-in kinds held in the
// store are served too, at their usual paths with their scope and kubectl
// short names; for the kinds client-go knows, strategic merge patches use
// the merge keys of the Go types and Kubernetes protobuf is accepted.
//
// Modes: Development serves plain HTTP and allows everything; Production
// serves HTTPS and authenticates every request with a bearer JWT and
// authorizes it with the token's rules (package auth).
package apiserver
