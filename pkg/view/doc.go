// Package view is an in-memory object store with Kubernetes semantics:
// objects keyed by group/version/kind, namespace and name, a monotonically
// increasing resourceVersion, optimistic concurrency on update, metadata.generation
// bumped on spec changes, and change notifications (Added, Modified, Deleted).
// It holds the views of operators and, for offline evaluation, any object.
package view
