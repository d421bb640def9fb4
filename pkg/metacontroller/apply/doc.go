// Package apply merges the desired state of an object returned by a hook
// into its observed state the way client-side `kubectl apply` does: a
// three-way merge of the observed object, the last applied configuration
// (kept in the metacontroller.k8s.io/last-applied-configuration annotation,
// the name Metacontroller uses) and the new desired configuration. Only the
// fields the hook sets are managed: fields that other writers (defaulting,
// admission, other controllers) add are kept, and fields the hook stops
// setting are removed.
//
// Lists are replaced as a whole, except associative lists, recognised by
// convention since schemaless objects carry no patch metadata: a list whose
// items are all objects sharing one of the conventional merge keys (name,
// containerPort, port, mountPath, devicePath, ip, type, topologyKey; the
// first that every item has) is merged item by item on that key, as
// strategic merge patch does for the built-in kinds.
//
// A field the hook still sets to what it applied last is settled when the
// API server only rendered it its own way, so that defaulting and admission
// never cause a write (or, with the Recreate strategies, a delete): a list
// replaced as a whole that the server extended (admission adds tolerations
// to a Pod; the observed list holds every desired item, in order, plus
// others), a resource.Quantity stored in canonical form ("1000m" as "1"),
// and a zero value (false, 0, "", {}, []) the server dropped. When the
// hook's value changes, or someone else removes or edits what it set, the
// desired value is written again.
package apply
