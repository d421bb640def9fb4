package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the ResourceGraphDefinition resource,
	// and the group of an instance kind whose schema names none.
	GroupName = "kro.run"
	// Version is the API version of the ResourceGraphDefinition resource.
	Version = "v1alpha1"
)

// GroupVersion is kro.run/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// SchemeBuilder registers the types of this package with a runtime.Scheme.
var (
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	AddToScheme   = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ResourceGraphDefinition{}, &ResourceGraphDefinitionList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
