package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the Metacontroller-compatible API.
	GroupName = "metacontroller.k8s.io"
	// Version is its API version.
	Version = "v1alpha1"
)

// GroupVersion is metacontroller.k8s.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// SchemeBuilder registers the types of this package with a runtime.Scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&CompositeController{}, &CompositeControllerList{},
		&DecoratorController{}, &DecoratorControllerList{},
		&ControllerRevision{}, &ControllerRevisionList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
