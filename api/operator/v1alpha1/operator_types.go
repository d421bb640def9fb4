package v1alpha1

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operator is a set of declarative controllers that run together.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=dop
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`,description="Controllers that are Ready, of all controllers"
// +kubebuilder:printcolumn:name="Controllers",type=string,JSONPath=`.status.controllerNames`,description="The operator's controllers"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Operator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OperatorSpec   `json:"spec"`
	Status OperatorStatus `json:"status,omitempty"`
}

// OperatorList is a list of Operators.
//
// +kubebuilder:object:root=true
type OperatorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Operator `json:"items"`
}

// OperatorSpec lists the controllers of an operator.
type OperatorSpec struct {
	// Controllers are run independently; they may chain through views.
	// +kubebuilder:validation:MinItems=1
	Controllers []Controller `json:"controllers"`
	// Limits bound what one change may cost the manager that runs the
	// operator; omitted fields take the manager's defaults.
	// +optional
	Limits *Limits `json:"limits,omitempty"`
	// Sharding says how a ring of managers (dctl start --sharding) splits
	// this operator between its members. "Operator" (the default) runs the
	// whole operator on the one member that holds the hash bucket of its
	// name. "Namespace" runs it on every member, each over the objects of
	// the namespaces whose buckets it holds; the pipelines must then never
	// combine objects of two namespaces (every @join requires equal
	// metadata.namespace, every @gather/@groupBy key uses it), sources and
	// targets must be namespaced, and each target object must be in the
	// namespace of its sources, or the controller is InvalidSpec. Without
	// a ring the field has no effect.
	// +kubebuilder:validation:Enum=Operator;Namespace
	// +optional
	Sharding ShardingMode `json:"sharding,omitempty"`
}

// ShardingMode is how a ring of managers splits an operator
// (OperatorSpec.Sharding).
type ShardingMode string

const (
	// ShardByOperator runs the whole operator on one member.
	ShardByOperator ShardingMode = "Operator"
	// ShardByNamespace runs the operator on every member, each over the
	// namespaces it holds.
	ShardByNamespace ShardingMode = "Namespace"
)

// Limits bound the work of an operator's controllers.
type Limits struct {
	// MaxDeltaEntries bounds the entries one pipeline stage of a controller
	// may emit for one source change (an update counts the entries it
	// removes and those it adds). A change over it is refused: the
	// controller reports it as a PipelineError naming the stage and keeps
	// the last state it accepted of the object until the object changes
	// again. When omitted, the manager's default applies (dctl
	// --max-delta-entries, 100000).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxDeltaEntries *int32 `json:"maxDeltaEntries,omitempty"`
}

// Controller watches its sources, runs the pipeline over them and writes the
// result into its targets.
type Controller struct {
	// Name identifies the controller inside its operator.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Sources are the resources the controller watches. When there is more
	// than one, the pipeline must start with a @join.
	// +kubebuilder:validation:MinItems=1
	Sources []Source `json:"sources"`
	// Pipeline is one stage or a list of stages (@join, @select, @project,
	// @unwind, @gather, @groupBy, @distinct).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Pipeline apiextensionsv1.JSON `json:"pipeline"`
	// Target is the resource the pipeline output is written to: the
	// one-item form of Targets. Exactly one of Target and Targets is set.
	// +optional
	Target *Target `json:"target,omitempty"`
	// Targets are the resources the pipeline outputs are written to, each
	// named by its name (default: its kind), unique within the controller.
	// A pipeline with several targets is a list of branches, each ending
	// in {"@output": <target name>}. Exactly one of Target and Targets is
	// set.
	// +optional
	Targets []Target `json:"targets,omitempty"`
	// Options are the controller options of Δ-controller's successor
	// (l7mp/dbsp). They are accepted and kept; none changes how this
	// controller runs (the manager logs which were set and why).
	// +optional
	Options *ControllerOptions `json:"options,omitempty"`
}

// ControllerOptions are the controller options of Δ-controller's successor,
// which switch off passes of its pipeline compiler. Here pipelines always
// run incrementally, with results equal to a run from scratch, and each
// target object is written from its one output document, so none of them
// applies.
type ControllerOptions struct {
	// DisableIncrementalizer runs the successor's pipeline on snapshots.
	// +optional
	DisableIncrementalizer bool `json:"disableIncrementalizer,omitempty"`
	// DisableReconciler switches off the successor's reconciler pass.
	// +optional
	DisableReconciler bool `json:"disableReconciler,omitempty"`
	// DisableDistincter switches off the successor's pass that makes every
	// output a set.
	// +optional
	DisableDistincter bool `json:"disableDistincter,omitempty"`
}

// AllTargets returns the controller's targets: Targets, or Target as a
// one-item list (nil when neither is set).
func (c *Controller) AllTargets() []Target {
	if c.Target != nil && len(c.Targets) == 0 {
		return []Target{*c.Target}
	}
	return c.Targets
}

// TargetField returns the spec field of the controller's target j (an
// index into AllTargets): "target" for the one-item form, else
// "targets[j]".
func (c *Controller) TargetField(j int) string {
	if c.Target != nil && len(c.Targets) == 0 {
		return "target"
	}
	return fmt.Sprintf("targets[%d]", j)
}

// Resource names a kind. A resource without an apiGroup is a view of the
// operator that holds it; apiGroup "" is the Kubernetes core group.
type Resource struct {
	// APIGroup is the group of the resource; omit it for a view, use "" for
	// the core group.
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`
	// Version is the version of the resource; when omitted it is discovered
	// through the RESTMapper (views are always v1alpha1).
	// +optional
	Version *string `json:"version,omitempty"`
	// Kind is the kind of the resource, e.g. Pod.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
}

// SourceType says how a source produces its input.
// +kubebuilder:validation:Enum=Watcher;Lister;OneShot;Periodic
type SourceType string

const (
	// Watcher sources stream every change of the watched objects (default).
	Watcher SourceType = "Watcher"
	// Lister is the successor's state-of-the-world source (each change
	// feeds the full filtered list). A controller's targets always equal
	// its pipeline evaluated on the current objects, so a Lister gives the
	// targets a Watcher gives, and it runs as a Watcher.
	Lister SourceType = "Lister"
	// OneShot sources emit a single empty object when the controller starts.
	OneShot SourceType = "OneShot"
	// Periodic sources trigger a full recomputation of the target state every
	// parameters.period (default 5m).
	Periodic SourceType = "Periodic"
)

// Source is a resource a controller watches.
type Source struct {
	Resource `json:",inline"`
	// Type is Watcher (default), Lister (run as a Watcher), OneShot or
	// Periodic.
	// +optional
	Type SourceType `json:"type,omitempty"`
	// Namespace restricts the source to one namespace.
	// +optional
	Namespace *string `json:"namespace,omitempty"`
	// LabelSelector restricts the source to the objects it selects.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// Predicate filters the change events of a Watcher source.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Predicate *apiextensionsv1.JSON `json:"predicate,omitempty"`
	// Parameters configure the source type (Periodic: {"period": "5m"}).
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`
}

// TargetType says how the pipeline output is written.
// +kubebuilder:validation:Enum=Updater;Patcher;Applier
type TargetType string

const (
	// Updater creates or replaces the target object (default) and deletes it
	// when the pipeline output disappears.
	Updater TargetType = "Updater"
	// Patcher applies the output as a JSON merge patch (RFC 7386) and, when
	// the output disappears, removes the fields it had set.
	Patcher TargetType = "Patcher"
	// Applier writes the output with server-side apply.
	Applier TargetType = "Applier"
)

// Target is a resource a controller writes.
type Target struct {
	// Name names the target within its controller, for a pipeline
	// branch's @output; the default is the kind. Two targets of one kind
	// need different names.
	// +optional
	Name     string `json:"name,omitempty"`
	Resource `json:",inline"`
	// Type is Updater (default), Patcher or Applier.
	// +optional
	Type TargetType `json:"type,omitempty"`
	// ExternalFields are fields of the target objects that the controller
	// hands off to other writers (an autoscaler's spec.replicas, say): each
	// is a dotted path of map keys (spec.replicas, metadata.labels.tier),
	// never through a list, never metadata.name or metadata.namespace. A
	// field is written when the controller creates the object and as long
	// as no other field manager has written it (the object's
	// metadata.managedFields tell); once one has, the controller neither
	// writes nor restores it: an Updater keeps the live value in the
	// object it sends, a Patcher leaves it out of its patch and of its
	// record, an Applier leaves it out of the applied object. An object
	// that the API server tracks no managedFields of (one created without
	// any field set) shows no other writer: its fields are always written.
	// Not allowed on a view target (views have no field managers).
	// +optional
	// +listType=set
	ExternalFields []string `json:"externalFields,omitempty"`
	// DeletionPolicy says what becomes of a target object when the output
	// no longer has it, and when the Operator is deleted: Delete (the
	// default) deletes an Updater's object when the output drops it (a
	// Patcher removes the fields it set, an Applier releases its fields),
	// and leaves the objects as they are when the Operator is deleted;
	// Orphan leaves the object and its content in both cases and removes
	// only the controller's marks (the owner and managed-metadata
	// annotations of an Updater, the record annotation of a Patcher, the
	// field manager entry of an Applier), so that nothing treats it as the
	// controller's any more.
	// +kubebuilder:validation:Enum=Delete;Orphan
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// Adoption says which target objects the controller may write:
	// AdoptOrCreate (the default) creates a missing object and takes over
	// an existing one that no running controller owns; Adopt never
	// creates (a missing object is reported as a write error naming it,
	// and retried); Create writes only objects it created, and reports an
	// existing object without its mark as an OwnerConflict. A Patcher
	// never creates: Create is not allowed on it. Views have no marks:
	// only AdoptOrCreate is allowed on a view target.
	// +kubebuilder:validation:Enum=AdoptOrCreate;Adopt;Create
	// +optional
	Adoption AdoptionPolicy `json:"adoption,omitempty"`
}

// DeletionPolicy is what becomes of a target object that the output no
// longer has (Target.DeletionPolicy).
type DeletionPolicy string

const (
	// DeletionDelete deletes the object (an Updater), or removes what the
	// controller wrote into it (a Patcher, an Applier).
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionOrphan leaves the object and removes the controller's marks.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// AdoptionPolicy says which target objects a controller may write
// (Target.Adoption).
type AdoptionPolicy string

const (
	// AdoptOrCreate creates missing objects and adopts unowned ones.
	AdoptOrCreate AdoptionPolicy = "AdoptOrCreate"
	// Adopt writes existing objects only.
	Adopt AdoptionPolicy = "Adopt"
	// Create writes only the objects the controller created.
	Create AdoptionPolicy = "Create"
)

// OutputName is the name a pipeline branch's {"@output": name} writes the
// target by: its name, else its kind.
func (t Target) OutputName() string {
	if t.Name != "" {
		return t.Name
	}
	return t.Kind
}

// OperatorStatus is the observed state of an operator.
type OperatorStatus struct {
	// Controllers holds the status of each controller, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Controllers []ControllerStatus `json:"controllers,omitempty"`
	// Ready is "<ready>/<total>": how many controllers have Ready=True, of
	// all controllers (kubectl get's READY column). See Summarize.
	// +optional
	Ready string `json:"ready,omitempty"`
	// ControllerNames are the controllers' names, comma-separated in spec
	// order (kubectl get's CONTROLLERS column). See Summarize.
	// +optional
	ControllerNames string `json:"controllerNames,omitempty"`
}

// Summarize fills Ready and ControllerNames from Controllers.
func (s *OperatorStatus) Summarize() {
	ready := 0
	names := make([]string, 0, len(s.Controllers))
	for _, c := range s.Controllers {
		names = append(names, c.Name)
		for _, cond := range c.Conditions {
			if cond.Type == "Ready" && cond.Status == metav1.ConditionTrue {
				ready++
				break
			}
		}
	}
	s.Ready = fmt.Sprintf("%d/%d", ready, len(s.Controllers))
	s.ControllerNames = strings.Join(names, ",")
}

// ControllerStatus is the observed state of one controller.
type ControllerStatus struct {
	// Name is the controller's name.
	Name string `json:"name"`
	// Conditions follow the Kubernetes API conventions; type Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastErrors holds the most recent errors, oldest first; each message
	// starts with the spec path of its cause.
	// +optional
	LastErrors []ErrorRecord `json:"lastErrors,omitempty"`
	// Counters count the controller's work since it started.
	// +optional
	Counters Counters `json:"counters,omitempty"`
}

// ErrorRecord is one error of a controller.
type ErrorRecord struct {
	// Time is when the error happened.
	Time metav1.Time `json:"time"`
	// Message names the spec path and the cause.
	Message string `json:"message"`
}

// Counters count a controller's work.
type Counters struct {
	// Deltas is the number of source changes processed.
	Deltas int64 `json:"deltas,omitempty"`
	// Writes is the number of successful target writes (create, update,
	// patch, apply, delete).
	Writes int64 `json:"writes,omitempty"`
	// WriteErrors is the number of failed target writes (each retry counts).
	WriteErrors int64 `json:"writeErrors,omitempty"`
}
