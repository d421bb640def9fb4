package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ResourceGraphDefinition declares a new API kind (spec.schema) and the
// resources every instance of that kind produces (spec.resources). The
// manager installs a CustomResourceDefinition for the kind and runs the
// graph for each instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=resourcegraphdefinitions,scope=Cluster,shortName=rgd
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="APIVERSION",type=string,priority=0,JSONPath=`.spec.schema.apiVersion`
// +kubebuilder:printcolumn:name="KIND",type=string,priority=0,JSONPath=`.spec.schema.kind`
// +kubebuilder:printcolumn:name="STATE",type=string,priority=0,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="READY",type=string,priority=0,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="TOPOLOGICALORDER",type=string,priority=1,JSONPath=`.status.topologicalOrder`
// +kubebuilder:printcolumn:name="AGE",type=date,priority=0,JSONPath=`.metadata.creationTimestamp`
type ResourceGraphDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceGraphDefinitionSpec   `json:"spec,omitempty"`
	Status ResourceGraphDefinitionStatus `json:"status,omitempty"`
}

// ResourceGraphDefinitionList is a list of ResourceGraphDefinitions.
//
// +kubebuilder:object:root=true
type ResourceGraphDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceGraphDefinition `json:"items"`
}

// ResourceGraphDefinitionSpec is the instance kind's schema and the
// resources of each instance.
type ResourceGraphDefinitionSpec struct {
	// Schema declares the instance kind: its group, version, kind, scope,
	// spec and status.
	// +kubebuilder:validation:Required
	Schema *Schema `json:"schema,omitempty"`
	// Resources are the objects an instance produces or reads. Expressions
	// in one resource that name another (${other.status.x}) order them.
	// +optional
	Resources []*Resource `json:"resources,omitempty"`
}

// Schema declares an instance kind in SimpleSchema.
type Schema struct {
	// Kind is the instance kind, UpperCamelCase. Immutable.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^[A-Z][a-zA-Z0-9]{0,62}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="kind is immutable"
	Kind string `json:"kind,omitempty"`
	// APIVersion is the version of the instance kind (v1, v1alpha1,
	// v2beta3, ...), not a group/version pair. Immutable.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Pattern=`^v[0-9]+(alpha[0-9]+|beta[0-9]+)?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="apiVersion is immutable"
	APIVersion string `json:"apiVersion,omitempty"`
	// Group is the API group of the instance kind; kro.run when omitted.
	// Immutable.
	// +optional
	// +kubebuilder:default="kro.run"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="group is immutable"
	Group string `json:"group,omitempty"`
	// Spec is the instance spec in SimpleSchema: each key a field, each
	// value a type string with optional markers ("integer | default=1
	// minimum=1") or a nested map of fields.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec runtime.RawExtension `json:"spec,omitzero"`
	// Types are named SimpleSchema types that Spec (and other types) may
	// use as field types.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Types runtime.RawExtension `json:"types,omitzero"`
	// Status maps instance status fields to ${...} expressions over the
	// resources, nested as the status is.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Status runtime.RawExtension `json:"status,omitzero"`
	// Scope is Namespaced (the default) or Cluster. Immutable.
	// +kubebuilder:default="Namespaced"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="scope is immutable"
	Scope ResourceScope `json:"scope,omitempty"`
	// AdditionalPrinterColumns replace the instance kind's default columns
	// (State, Ready, Age) when set.
	// +optional
	AdditionalPrinterColumns []apiextensionsv1.CustomResourceColumnDefinition `json:"additionalPrinterColumns,omitempty"`
	// ShortNames are kubectl aliases of the instance kind.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	ShortNames []string `json:"shortNames,omitempty"`
	// Categories are the kubectl categories (kubectl get <category>) the
	// instance kind belongs to.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	Categories []string `json:"categories,omitempty"`
	// Metadata holds labels and annotations for the generated CRD (not for
	// the instances).
	// +optional
	Metadata *CRDMetadata `json:"metadata,omitempty"`
}

// ResourceScope is the scope of an instance kind.
//
// +kubebuilder:validation:Enum=Namespaced;Cluster
type ResourceScope string

const (
	// ResourceScopeNamespaced: instances live in a namespace (the default).
	ResourceScopeNamespaced ResourceScope = "Namespaced"
	// ResourceScopeCluster: instances are cluster-scoped.
	ResourceScopeCluster ResourceScope = "Cluster"
)

// CRDMetadata are labels and annotations for the generated CRD.
type CRDMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Resource is one node of the graph: an object created from Template, or
// an existing object read through ExternalRef (exactly one of the two).
//
// +kubebuilder:validation:XValidation:rule="(has(self.template) && !has(self.externalRef)) || (!has(self.template) && has(self.externalRef))",message="exactly one of template or externalRef must be provided"
type Resource struct {
	// ID names the resource in expressions (${id.status.x}); lowerCamelCase,
	// unique in the RGD.
	// +kubebuilder:validation:Required
	ID string `json:"id,omitempty"`
	// Template is the object to create, with ${...} expressions anywhere
	// in its values.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Template runtime.RawExtension `json:"template,omitzero"`
	// ExternalRef names an existing object (or a label selector over
	// objects) to read instead of creating one.
	// +optional
	ExternalRef *ExternalRef `json:"externalRef,omitempty"`
	// ReadyWhen are ${...} expressions that must all be true for the
	// resource to count as ready; without them it is ready once it exists.
	// +optional
	ReadyWhen []string `json:"readyWhen,omitempty"`
	// IncludeWhen are ${...} expressions that must all be true for the
	// resource to exist; re-evaluated on every change.
	// +optional
	IncludeWhen []string `json:"includeWhen,omitempty"`
	// ForEach turns the resource into a collection: each dimension binds
	// one variable to a ${...} list expression, and one object is made per
	// element of the Cartesian product of the dimensions.
	// +optional
	ForEach []ForEachDimension `json:"forEach,omitempty"`
}

// ForEachDimension binds one iterator variable (its only key) to a ${...}
// expression giving a list, e.g. {"region": "${schema.spec.regions}"}.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type ForEachDimension map[string]string

// ExternalRef is a reference to objects the graph reads but does not own.
type ExternalRef struct {
	// APIVersion of the referenced objects, e.g. "v1" or "apps/v1".
	// +kubebuilder:validation:Required
	APIVersion string `json:"apiVersion"`
	// Kind of the referenced objects.
	// +kubebuilder:validation:Required
	Kind string `json:"kind"`
	// Metadata names one object (name, namespace) or selects several
	// (selector, namespace).
	// +kubebuilder:validation:Required
	Metadata ExternalRefMetadata `json:"metadata"`
}

// ExternalRefMetadata names one object or selects a collection: exactly one
// of Name and Selector is set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.name) && !has(self.selector)) || (!has(self.name) && has(self.selector))",message="exactly one of name or selector must be provided"
type ExternalRefMetadata struct {
	// Name of the one referenced object.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
	// Namespace of the referenced object(s). For a name it defaults to the
	// instance's namespace; for a selector, empty means every namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Selector selects a collection of objects by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ResourceGraphDefinitionState is Active when the graph is accepted and its
// instance kind served, Inactive otherwise.
type ResourceGraphDefinitionState string

const (
	// ResourceGraphDefinitionStateActive: accepted and serving.
	ResourceGraphDefinitionStateActive ResourceGraphDefinitionState = "Active"
	// ResourceGraphDefinitionStateInactive: not accepted, or not serving.
	ResourceGraphDefinitionStateInactive ResourceGraphDefinitionState = "Inactive"
)

// ResourceGraphDefinitionStatus is what the manager observed of an RGD.
type ResourceGraphDefinitionStatus struct {
	// State is Active or Inactive.
	// +optional
	State ResourceGraphDefinitionState `json:"state,omitempty"`
	// TopologicalOrder lists the resource ids in the order they are
	// created (each after the resources its expressions reference).
	// +optional
	TopologicalOrder []string `json:"topologicalOrder,omitempty"`
	// Conditions of the RGD (Ready and the conditions it sums up).
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
	// Resources lists each resource with the resources it depends on.
	// +optional
	Resources []ResourceInformation `json:"resources,omitempty"`
}

// ResourceInformation is one resource and its dependencies.
type ResourceInformation struct {
	// ID of the resource.
	ID string `json:"id,omitempty"`
	// Dependencies are the resources its expressions reference.
	// +optional
	Dependencies []Dependency `json:"dependencies,omitempty"`
}

// Dependency names a resource another one depends on.
type Dependency struct {
	// ID of the resource depended on.
	ID string `json:"id,omitempty"`
}

// ConditionType is the type of a Condition.
type ConditionType string

// Condition types of an RGD; Ready is true when the other three are.
const (
	// ConditionReady sums up the conditions below.
	ConditionReady ConditionType = "Ready"
	// ConditionGraphAccepted: the schema and resources compiled.
	ConditionGraphAccepted ConditionType = "GraphAccepted"
	// ConditionKindReady: the instance CRD is installed and established.
	ConditionKindReady ConditionType = "KindReady"
	// ConditionControllerReady: the instance controller runs.
	ConditionControllerReady ConditionType = "ControllerReady"
)

// Condition types the manager sets on every instance.
const (
	// InstanceConditionReady is true when the three below are.
	InstanceConditionReady ConditionType = "Ready"
	// InstanceConditionInstanceManaged: the instance carries the
	// manager's finalizer and labels.
	InstanceConditionInstanceManaged ConditionType = "InstanceManaged"
	// InstanceConditionGraphResolved: every expression of the graph
	// resolved for this instance.
	InstanceConditionGraphResolved ConditionType = "GraphResolved"
	// InstanceConditionResourcesReady: every included resource exists and
	// is ready.
	InstanceConditionResourcesReady ConditionType = "ResourcesReady"
)

// InstanceState is the summary of an instance in its status.state.
type InstanceState string

// Instance states, as kro writes them.
const (
	InstanceStateInProgress InstanceState = "IN_PROGRESS"
	InstanceStateActive     InstanceState = "ACTIVE"
	InstanceStateDeleting   InstanceState = "DELETING"
	InstanceStateError      InstanceState = "ERROR"
	// InstanceStateFailed is kept for readers of older instances.
	InstanceStateFailed InstanceState = "FAILED"
)

// Condition is one condition of an RGD's status. Unlike metav1.Condition,
// reason, message and lastTransitionTime are optional, as in kro.
type Condition struct {
	// Type of the condition.
	Type ConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status metav1.ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// Reason is a CamelCase word for the last transition.
	// +optional
	Reason *string `json:"reason,omitempty"`
	// Message says what happened, for humans.
	// +optional
	Message *string `json:"message,omitempty"`
	// ObservedGeneration is the metadata.generation the condition was
	// computed from.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
