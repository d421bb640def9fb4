// Package rbac computes the least-privilege RBAC rules (rbac.authorization.k8s.io/v1)
// that the dcontroller manager needs to run a set of operators, and renders
// them as a ClusterRole, namespaced Roles and, optionally, their bindings.
//
// The rules follow what the runtime does with each source and target kind
// (package controller and package operator):
//
//   - a Watcher or Periodic source is listed and watched through a shared
//     informer and read from its cache: get, list, watch;
//   - an Updater target creates, replaces and deletes objects, reads them from
//     the informer cache and lists them on resync: create, update, delete,
//     get, list, watch;
//   - a Patcher target sends JSON merge patches and reads the current state
//     from the cache: get, patch, list, watch;
//   - an Applier target uses server-side apply (an HTTP PATCH) and reads from
//     the cache: get, patch, list, watch;
//   - a target whose pipeline output sets a top-level status also gets its
//     status subresource: update (Updater) or patch (Patcher, Applier);
//   - OneShot sources and views (in-memory kinds of the group
//     <operator>.view.dcontroller.io) need nothing.
//
// CompositeControllers and DecoratorControllers (package metacontroller)
// get get, list, watch, update, patch on their parent (decorated) resources
// with update on /status and /finalizers, every write verb on their child
// (attachment) resources, and get on the Secrets and ConfigMaps their
// webhooks' connection settings name (see ComputeInput).
//
// A source restricted to a namespace is granted by a Role in that namespace;
// everything else by the ClusterRole. A Role rule the ClusterRole already
// covers is left out.
//
// Kinds are turned into resources by a RESTMapper (API discovery) when one
// is given, otherwise by the Kubernetes lowercase-plural convention
// (meta.UnsafeGuessKindToResource: Pod -> pods, Ingress -> ingresses,
// NetworkPolicy -> networkpolicies).
package rbac
