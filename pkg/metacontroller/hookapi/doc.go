// Package hookapi holds the hook contract of Metacontroller-compatible
// controllers: the JSON requests dcontroller sends to sync, finalize and
// customize hooks and the responses it expects, as plain structs with JSON
// tags.
//
// The contract has two versions (Hook.version): they share every field and
// differ only in how the objects of an ObjectMap are keyed. Both key the
// outer map by "<Kind>.<apiVersion>" (e.g. "Pod.v1", "StatefulSet.apps/v1");
// inside it, v1 uses the name relative to the parent (the name, or
// "<namespace>/<name>" when the parent is cluster-scoped and the object
// namespaced) and v2 uses the uniform name ("<namespace>/<name>" for every
// namespaced object, the name for cluster-scoped ones). This follows
// Metacontroller's published hook reference.
//
// Responses are decoded with sigs.k8s.io/json so that integers stay int64,
// as in objects read from the API server: a desired child compares equal to
// its observed twin. Strict mode rejects unknown and duplicated fields.
package hookapi
