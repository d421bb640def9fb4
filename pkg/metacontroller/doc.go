// Package metacontroller runs Metacontroller-compatible hook controllers:
// CompositeController and DecoratorController objects
// (metacontroller.k8s.io/v1alpha1) on a controller-runtime manager.
//
// Setup registers a reconciler over both kinds; each object becomes one
// dynamic controller that is started when the object appears, restarted
// when its spec (generation) or annotations change, and stopped when it is
// deleted; stopping never touches parents or children. A dynamic controller
// watches its parents, children and related objects through the manager's
// shared informers (one event handler each, removed on stop), calls the
// hooks (package hook) and converges the cluster to the returned desired
// state with the manager's client:
//
//   - children are applied as `kubectl apply` would (package apply): a
//     three-way merge with the last applied state, no write when nothing
//     changes, a controller owner reference to the parent;
//   - observed children that the response leaves out are deleted; orphans
//     that match the parent's selector are adopted and owned children that
//     stop matching are released (ControllerRef rules);
//   - update strategies OnDelete, Recreate, InPlace, RollingRecreate and
//     RollingInPlace; rolling updates record parent revisions in
//     ControllerRevision objects and move one child at a time;
//   - a finalize hook adds a finalizer to the parent that is removed when
//     the hook answers finalized: true;
//   - a customize hook selects related objects whose changes resync the
//     parents that asked for them;
//   - resyncPeriodSeconds and resyncAfterSeconds resync parents;
//   - a failed hook never deletes anything: the parent is retried with
//     exponential backoff and gets a Warning Event and a Synced=False
//     condition in its status (replaced by the hook's status on the next
//     success).
//
// Hot loops are avoided in three ways: writes are skipped when the merged
// object or status equals the observed one; the events caused by the
// controller's own writes are awaited as "expectations" and resync the
// parent once, when all have been observed; and a parent whose observed
// state (parent, children and related objects by resourceVersion) equals
// the state of its last successful sync is not synced again, except by a
// resync.
//
// Render makes the same decisions offline, on objects from files and an
// in-memory store instead of a cluster (dctl eval of hook controllers).
package metacontroller
