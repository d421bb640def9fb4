// Package view is an in-memory object store with Kubernetes semantics:
// objects keyed by group/version/kind, namespace and name, a monotonically
// increasing resourceVersion, optimistic concurrency on update, metadata.generation
// bumped on spec changes, and change notifications (Added, Modified, Deleted).
// It holds the views of operators and, for offline evaluation, any object.
//
// For serving the store to Kubernetes clients (package apiserver) it also
// has: Select, a list with label and field (metadata.name,
// metadata.namespace) selectors that reports the resourceVersion of the
// snapshot; Watch, which follows the Kubernetes watch semantics (initial
// ADDED events, resuming from a resourceVersion out of a bounded history
// with 410 Gone past it, objects moving in and out of a selection seen as
// ADDED/DELETED, BOOKMARK events, the watch-list end-of-initial-events
// bookmark) and delivers every change in resourceVersion order;
// DeleteIf and DeleteCollection; and, with Options.ServerMetadata, the uid
// and creationTimestamp an API server sets.
package view
