// Package v1alpha1 holds the Metacontroller-compatible API (group
// metacontroller.k8s.io, version v1alpha1): CompositeController and
// DecoratorController, the cluster-scoped objects that declare a hook-based
// controller, and ControllerRevision, the namespaced record of a parent's
// revisions that rolling child updates keep.
//
// Field names and JSON shapes follow Metacontroller's published API
// reference, so existing manifests apply unchanged. Additions are marked as
// dcontroller extensions: Hook.Pipeline (an inline dcontroller expression in
// place of a webhook) and the observedGeneration/conditions of the
// controllers' status.
//
// +kubebuilder:object:generate=true
// +groupName=metacontroller.k8s.io
package v1alpha1
