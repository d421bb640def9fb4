package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the Operator resource.
	GroupName = "dcontroller.io"
	// Version is the API version of the Operator resource.
	Version = "v1alpha1"
	// ViewGroupSuffix is appended to an operator's name to form the API group
	// of its views: <operator>.view.dcontroller.io.
	ViewGroupSuffix = "view.dcontroller.io"
)

// GroupVersion is the group and version of the Operator API.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// SchemeBuilder registers the Operator types with a runtime.Scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Operator{}, &OperatorList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// ViewGroup returns the API group that holds the views of the named
// operator: "<operator>.view.dcontroller.io".
func ViewGroup(operator string) string { return operator + "." + ViewGroupSuffix }

// ViewGroupVersion returns the group/version of the named operator's views.
func ViewGroupVersion(operator string) schema.GroupVersion {
	return schema.GroupVersion{Group: ViewGroup(operator), Version: Version}
}

// IsViewGroup reports whether group is the view group of some operator.
func IsViewGroup(group string) bool {
	return len(group) > len(ViewGroupSuffix)+1 && group[len(group)-len(ViewGroupSuffix)-1:] == "."+ViewGroupSuffix
}

// OwnerAnnotation marks the native objects an Updater target created; its
// value is "<operator>/<controller>". A manager only ever deletes stale
// objects that carry its own mark.
const OwnerAnnotation = "dcontroller.io/owner"

// KeepAnnotation, set to "true" on a pipeline output object, means "keep
// the existing object as it is": the target neither writes nor deletes
// the object of that name and namespace (nor creates it when it does not
// exist), and keeps its record of it, as long as the output holds such an
// object. The output object needs only apiVersion, kind, metadata.name,
// metadata.namespace and the annotation; it is never written. A pipeline
// emits it for an object it cannot compute yet but must not remove (the
// compiled ResourceGraphDefinitions use it for a resource that waits on a
// dependency, see docs/kro.md).
const KeepAnnotation = "dcontroller.io/keep"

// KeepValue is the value of KeepAnnotation that keeps an object.
const KeepValue = "true"
