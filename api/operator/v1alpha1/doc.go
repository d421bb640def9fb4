// Package v1alpha1 holds the Operator API (group dcontroller.io, version v1alpha1):
// a cluster-scoped object whose spec lists declarative controllers, each with
// sources to watch, a pipeline to run over them, and a target to write.
//
// +kubebuilder:object:generate=true
// +groupName=dcontroller.io
package v1alpha1
