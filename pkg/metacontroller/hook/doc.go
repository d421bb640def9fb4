// Package hook calls the hooks of Metacontroller-compatible controllers.
//
// A hook is either a webhook (Metacontroller's contract: an HTTP POST of the
// JSON request, a 200 response with the JSON response) or, as a dcontroller
// extension, an inline pipeline expression (package expression) evaluated
// with the request as its subject. Both implement Caller.
//
// The webhook client follows Metacontroller's hook reference: url, or
// service plus path; timeout (default 10s); responseUnMarshallMode (loose
// for v1 hooks, strict for v2 by default); ETag caching (RFC 7232: the
// cached ETag goes out in If-None-Match and a 304 Not Modified or 412
// Precondition Failed answer reuses the cached body); a private CA bundle
// (inline, Secret or ConfigMap); token (authorization) or Basic (RFC 7617)
// authentication; a client certificate (mutual TLS); and per-host
// endpointConfigs that apply when the hook sets none of those itself.
// Secrets and ConfigMaps are read when first needed and re-read after a
// failure, so a credential created after the controller is picked up.
// Redirects are not followed (a 3xx answer other than 304 fails the call),
// so the body and credentials go only to the address the spec names.
//
// Answers are bounded by Limits (body bytes; children, attachments and
// related-resource rules per answer; bytes per child; JSON values; nesting
// depth), checked by a scan that allocates nothing before the answer is
// decoded, so that one hook cannot make the shared manager run out of
// memory.
//
// Every call is measured in Prometheus metrics registered with
// controller-runtime's registry: dcontroller_metacontroller_hook_calls_total,
// dcontroller_metacontroller_hook_errors_total (by reason) and
// dcontroller_metacontroller_hook_duration_seconds.
package hook
