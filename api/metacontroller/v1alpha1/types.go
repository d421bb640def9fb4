package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CompositeController declares a controller whose parent objects own a set
// of children: the sync hook maps each parent (and its observed children)
// to the desired children and the parent's status.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=compositecontrollers,scope=Cluster,shortName=cc;cctl
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the controller runs"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Running, or why the controller does not run"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:subresource:status
type CompositeController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CompositeControllerSpec   `json:"spec"`
	Status CompositeControllerStatus `json:"status,omitempty"`
}

// CompositeControllerList is a list of CompositeControllers.
//
// +kubebuilder:object:root=true
type CompositeControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CompositeController `json:"items"`
}

// CompositeControllerSpec is the desired behaviour of a CompositeController.
type CompositeControllerSpec struct {
	// ParentResource is the resource whose objects are the parents.
	ParentResource CompositeControllerParentResourceRule `json:"parentResource"`
	// ChildResources lists every resource the sync hook may return children of.
	// +optional
	ChildResources []CompositeControllerChildResourceRule `json:"childResources,omitempty"`
	// Hooks are the sync, finalize and customize hooks.
	// +optional
	Hooks *CompositeControllerHooks `json:"hooks,omitempty"`
	// ResyncPeriodSeconds, when set, calls the sync hook for every parent this
	// often even when nothing changed.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// GenerateSelector ignores the parents' spec.selector and selects the
	// children labelled controller-uid=<parent uid> instead.
	// +optional
	GenerateSelector *bool `json:"generateSelector,omitempty"`
	// EndpointConfigs are per-host connection settings (CA bundle, client
	// certificate, authentication) for the webhooks of this controller.
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
}

// ResourceRule names a resource by API version and plural resource name.
type ResourceRule struct {
	// APIVersion is "<group>/<version>", or "<version>" for the core group.
	APIVersion string `json:"apiVersion"`
	// Resource is the lowercase plural resource name, e.g. "pods".
	Resource string `json:"resource"`
}

// CompositeControllerParentResourceRule selects the parent resource.
type CompositeControllerParentResourceRule struct {
	ResourceRule `json:",inline"`
	// LabelSelector, when set, restricts the parents to the objects whose
	// labels match it.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// RevisionHistory says which parent fields roll out gradually to the
	// children that use a rolling update method.
	// +optional
	RevisionHistory *CompositeControllerRevisionHistory `json:"revisionHistory,omitempty"`
	// IgnoreStatusChanges, when true, does not sync a parent whose only change
	// is in its status.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// CompositeControllerRevisionHistory configures parent revisions.
type CompositeControllerRevisionHistory struct {
	// FieldPaths are dotted paths (e.g. "spec.template") of the parent fields
	// that trigger rolling updates; the default is ["spec"].
	// +optional
	FieldPaths []string `json:"fieldPaths,omitempty"`
}

// ChildUpdateMethod says how existing children that differ from the desired
// state are updated.
// +kubebuilder:validation:Enum=OnDelete;Recreate;InPlace;RollingRecreate;RollingInPlace
type ChildUpdateMethod string

const (
	// ChildUpdateOnDelete never updates an existing child (the default).
	ChildUpdateOnDelete ChildUpdateMethod = "OnDelete"
	// ChildUpdateRecreate deletes a differing child and creates it anew.
	ChildUpdateRecreate ChildUpdateMethod = "Recreate"
	// ChildUpdateInPlace updates a differing child.
	ChildUpdateInPlace ChildUpdateMethod = "InPlace"
	// ChildUpdateRollingRecreate recreates one child at a time, pausing while
	// an updated child fails its status checks.
	ChildUpdateRollingRecreate ChildUpdateMethod = "RollingRecreate"
	// ChildUpdateRollingInPlace updates one child at a time, pausing while an
	// updated child fails its status checks.
	ChildUpdateRollingInPlace ChildUpdateMethod = "RollingInPlace"
)

// CompositeControllerChildResourceRule declares one child resource.
type CompositeControllerChildResourceRule struct {
	ResourceRule `json:",inline"`
	// UpdateStrategy says how existing children are updated (default OnDelete).
	// +optional
	UpdateStrategy *CompositeControllerChildUpdateStrategy `json:"updateStrategy,omitempty"`
}

// CompositeControllerChildUpdateStrategy is the update strategy of a child
// resource.
type CompositeControllerChildUpdateStrategy struct {
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
	// StatusChecks must pass on updated children before a rolling update
	// moves on to the next child.
	// +optional
	StatusChecks ChildUpdateStatusChecks `json:"statusChecks,omitempty"`
}

// ChildUpdateStatusChecks are the checks of an updated child.
type ChildUpdateStatusChecks struct {
	// +optional
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck requires a status condition of the given type, with
// the given status and reason when these are set.
type StatusConditionCheck struct {
	Type string `json:"type"`
	// +optional
	Status *string `json:"status,omitempty"`
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// CompositeControllerHooks are the hooks of a CompositeController.
type CompositeControllerHooks struct {
	// +optional
	Customize *Hook `json:"customize,omitempty"`
	// +optional
	Sync *Hook `json:"sync,omitempty"`
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
	// PreUpdateChild is accepted for compatibility and never called.
	// +optional
	PreUpdateChild *Hook `json:"preUpdateChild,omitempty"`
	// PostUpdateChild is accepted for compatibility and never called.
	// +optional
	PostUpdateChild *Hook `json:"postUpdateChild,omitempty"`
}

// HookVersion is the version of the hook request/response contract.
// +kubebuilder:validation:Enum=v1;v2
type HookVersion string

const (
	// HookVersionV1 keys children by name, or by namespace/name when the
	// parent is cluster-scoped and the child namespaced (the default).
	HookVersionV1 HookVersion = "v1"
	// HookVersionV2 keys namespaced objects by namespace/name and
	// cluster-scoped ones by name, whatever the parent's scope.
	HookVersionV2 HookVersion = "v2"
)

// Hook says how to call a hook: a webhook, or (dcontroller extension) an
// inline pipeline expression.
type Hook struct {
	// Version of the request/response contract (default v1).
	// +optional
	Version *HookVersion `json:"version,omitempty"`
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
	// Pipeline is a dcontroller expression evaluated with the hook request as
	// its subject `$`; its value is the hook response. A dcontroller
	// extension: no server to deploy.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Pipeline *apiextensionsv1.JSON `json:"pipeline,omitempty"`
}

// ResponseUnmarshallMode is how strictly a hook response is decoded.
// +kubebuilder:validation:Enum=loose;strict
type ResponseUnmarshallMode string

const (
	// ResponseUnmarshallModeLoose ignores unknown fields (default for v1).
	ResponseUnmarshallModeLoose ResponseUnmarshallMode = "loose"
	// ResponseUnmarshallModeStrict rejects unknown and duplicated fields
	// (default for v2).
	ResponseUnmarshallModeStrict ResponseUnmarshallMode = "strict"
)

// Webhook says how to reach a hook over HTTP(S).
type Webhook struct {
	// URL is the full URL of the hook; it overrides service and path.
	// +optional
	URL *string `json:"url,omitempty"`
	// Timeout of one call (Go duration; default 10s). The API server
	// refuses values that are not Go durations, so that no object can stop
	// the controllers' informers from decoding their list.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Path is appended to the service address.
	// +optional
	Path *string `json:"path,omitempty"`
	// Service is the Kubernetes Service that serves the hook.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// Etag enables If-None-Match requests and reuse of the cached response on
	// 304 Not Modified or 412 Precondition Failed (RFC 7232).
	// +optional
	Etag *WebhookEtagConfig `json:"etag,omitempty"`
	// ResponseUnMarshallMode is loose or strict (default: loose for v1 hooks,
	// strict for v2).
	// +optional
	ResponseUnMarshallMode *ResponseUnmarshallMode `json:"responseUnMarshallMode,omitempty"`
	// CABundle verifies the server certificate of an HTTPS hook.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// Authorization sends a token in the Authorization header.
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// BasicAuth sends HTTP Basic credentials (RFC 7617).
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
	// ClientTLS presents a client certificate (mutual TLS).
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
}

// ServiceReference names the Service of a webhook.
type ServiceReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Port defaults to 80.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// Protocol defaults to http.
	// +optional
	Protocol *string `json:"protocol,omitempty"`
}

// WebhookEtagConfig configures the ETag response cache of a webhook.
type WebhookEtagConfig struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// CacheTimeoutSeconds is how long a cached response is kept.
	// +optional
	CacheTimeoutSeconds *int32 `json:"cacheTimeoutSeconds,omitempty"`
	// CacheCleanupSeconds is how often expired entries are dropped.
	// +optional
	CacheCleanupSeconds *int32 `json:"cacheCleanupSeconds,omitempty"`
}

// CABundleConfig is exactly one source of PEM CA certificates.
type CABundleConfig struct {
	// +optional
	Inline *string `json:"inline,omitempty"`
	// +optional
	SecretRef *KeySelector `json:"secretRef,omitempty"`
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty"`
}

// KeySelector names a key of a Secret or ConfigMap.
type KeySelector struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Key defaults to ca.crt for CA bundles; required for authorization.
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// AuthorizationConfig sends "Authorization: <type> <credential>".
type AuthorizationConfig struct {
	// Type is the scheme, default Bearer; Basic is not allowed (use basicAuth).
	// +optional
	Type string `json:"type,omitempty"`
	// SecretRef holds the credential.
	SecretRef KeySelector `json:"secretRef"`
}

// BasicAuthConfig reads a username and password from a Secret.
type BasicAuthConfig struct {
	SecretRef SecretReference `json:"secretRef"`
	// UsernameKey defaults to username.
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`
	// PasswordKey defaults to password.
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// ClientTLSConfig reads a client certificate and key from a Secret.
type ClientTLSConfig struct {
	SecretRef SecretReference `json:"secretRef"`
	// CertKey defaults to tls.crt.
	// +optional
	CertKey string `json:"certKey,omitempty"`
	// PrivateKeyKey defaults to tls.key.
	// +optional
	PrivateKeyKey string `json:"privateKeyKey,omitempty"`
}

// EndpointConfig holds the connection settings of the webhooks whose host
// (host[:port], case-insensitive, default ports ignored) matches Host. A hook
// that sets any of these fields itself does not use the entry.
type EndpointConfig struct {
	Host string `json:"host"`
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
}

// CompositeControllerStatus reports what dcontroller does with the
// controller (dcontroller extension; Metacontroller leaves it empty).
type CompositeControllerStatus struct {
	// ObservedGeneration is the generation of the running spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready says whether the controller runs.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DecoratorController declares a controller that adds labels, annotations,
// status and attachments to existing objects.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=decoratorcontrollers,scope=Cluster,shortName=dec;decorators
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the controller runs"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Running, or why the controller does not run"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:subresource:status
type DecoratorController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DecoratorControllerSpec   `json:"spec"`
	Status DecoratorControllerStatus `json:"status,omitempty"`
}

// DecoratorControllerList is a list of DecoratorControllers.
//
// +kubebuilder:object:root=true
type DecoratorControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DecoratorController `json:"items"`
}

// DecoratorControllerSpec is the desired behaviour of a DecoratorController.
type DecoratorControllerSpec struct {
	// Resources select the objects to decorate.
	Resources []DecoratorControllerResourceRule `json:"resources"`
	// Attachments lists every resource the sync hook may attach.
	// +optional
	Attachments []DecoratorControllerAttachmentRule `json:"attachments,omitempty"`
	// +optional
	Hooks *DecoratorControllerHooks `json:"hooks,omitempty"`
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
}

// DecoratorControllerResourceRule selects objects to decorate.
type DecoratorControllerResourceRule struct {
	ResourceRule `json:",inline"`
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	AnnotationSelector *AnnotationSelector `json:"annotationSelector,omitempty"`
	// IgnoreStatusChanges, when true, does not sync an object whose only
	// change is in its status.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// AnnotationSelector selects objects by annotations, with label selector
// semantics.
type AnnotationSelector struct {
	// +optional
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	// +optional
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// DecoratorControllerAttachmentRule declares one attachment resource.
type DecoratorControllerAttachmentRule struct {
	ResourceRule `json:",inline"`
	// +optional
	UpdateStrategy *DecoratorControllerAttachmentUpdateStrategy `json:"updateStrategy,omitempty"`
}

// DecoratorControllerAttachmentUpdateStrategy is OnDelete (default),
// Recreate or InPlace.
type DecoratorControllerAttachmentUpdateStrategy struct {
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
}

// DecoratorControllerHooks are the hooks of a DecoratorController.
type DecoratorControllerHooks struct {
	// +optional
	Customize *Hook `json:"customize,omitempty"`
	// +optional
	Sync *Hook `json:"sync,omitempty"`
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
}

// DecoratorControllerStatus reports what dcontroller does with the
// controller (dcontroller extension).
type DecoratorControllerStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ControllerRevision records one revision of a parent for rolling updates:
// the parent fields that roll out (ParentPatch) and the children at that
// revision. It lives in the parent's namespace and is owned by the parent.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=controllerrevisions,scope=Namespaced
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, request not yet submitted"
type ControllerRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// ParentPatch holds the revision's values of the revisionHistory field
	// paths of the parent.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	ParentPatch runtime.RawExtension `json:"parentPatch"`
	// Children are the children at this revision, by API group and kind.
	// +optional
	Children []ControllerRevisionChildren `json:"children,omitempty"`
}

// ControllerRevisionChildren are the names of the children of one group and
// kind at a revision.
type ControllerRevisionChildren struct {
	APIGroup string   `json:"apiGroup"`
	Kind     string   `json:"kind"`
	Names    []string `json:"names"`
}

// ControllerRevisionList is a list of ControllerRevisions.
//
// +kubebuilder:object:root=true
type ControllerRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControllerRevision `json:"items"`
}

// RelatedResourceRule is one entry of a customize hook response: the
// related objects a sync hook needs. A rule selects either by labelSelector
// or by names, and either by namespace or by namespaceSelector. With a v1
// customize hook, a namespaced parent's rule without namespace or
// namespaceSelector selects in the parent's namespace, and names may not
// reach another namespace; with v2 a rule selects what it says
// (Metacontroller's rules).
type RelatedResourceRule struct {
	ResourceRule `json:",inline"`
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// NamespaceSelector selects the namespaces (by their labels) whose
	// objects are related.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	Names []string `json:"names,omitempty"`
}
