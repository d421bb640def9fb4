package rgdruntime

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	krov1a1 "github.com/dcontroller/dcontroller/api/kro/v1alpha1"
	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/rgd"
)

// Reasons of the RGD's conditions. Those of kro's have kro's words (Valid,
// InvalidResourceGraph, Ready, Failed, Running, FailedToStart); the others
// name what only this manager reports.
const (
	ReasonValid                = "Valid"
	ReasonInvalidResourceGraph = "InvalidResourceGraph"
	ReasonReady                = "Ready"
	ReasonFailed               = "Failed"
	// ReasonEstablishing: the CRD is applied, the API server has not
	// established it yet.
	ReasonEstablishing = "Establishing"
	// ReasonCRDConflict: the CRD the RGD declares exists and belongs to
	// something else (another RGD, or no RGD).
	ReasonCRDConflict = "CRDConflict"
	ReasonRunning     = "Running"
	ReasonStarting    = "Starting"
	// ReasonFailedToStart: a controller of the RGD did not start.
	ReasonFailedToStart = "FailedToStart"
	// ReasonNotCompiled: the RGD's resources are not compiled into
	// controllers (Compiled.Operator is nil).
	ReasonNotCompiled = "NotCompiled"
	// ReasonNameConflict: an Operator object has the name of the RGD's
	// compiled Operator.
	ReasonNameConflict = "NameConflict"
	// ReasonWaiting: a condition before this one is not true yet.
	ReasonWaiting = "Waiting"
	// ReasonNotReady: Ready's reason when a condition it sums up is not
	// true.
	ReasonNotReady = "NotReady"
	// ReasonDeleting: Ready's reason while a deleted RGD waits for its
	// instances to go.
	ReasonDeleting = "Deleting"
)

// conditionTypes are the conditions Ready sums up, in the order they are
// reached.
var conditionTypes = []krov1a1.ConditionType{krov1a1.ConditionGraphAccepted, krov1a1.ConditionKindReady, krov1a1.ConditionControllerReady}

// setCondition sets a condition of conds: lastTransitionTime changes only
// when the status does (the Kubernetes API convention for conditions).
func setCondition(conds *[]krov1a1.Condition, t krov1a1.ConditionType, status metav1.ConditionStatus, reason, msg string, generation int64, now metav1.Time) {
	c := krov1a1.Condition{Type: t, Status: status, Reason: &reason, Message: &msg, ObservedGeneration: generation, LastTransitionTime: &now}
	for i := range *conds {
		if (*conds)[i].Type != t {
			continue
		}
		if old := (*conds)[i]; old.Status == status && old.LastTransitionTime != nil {
			c.LastTransitionTime = old.LastTransitionTime
		}
		(*conds)[i] = c
		return
	}
	*conds = append(*conds, c)
}

// findCondition returns the condition of type t, or nil.
func findCondition(conds []krov1a1.Condition, t krov1a1.ConditionType) *krov1a1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// summarize sets Ready from the other conditions (True when every one of
// them is, else False naming the first that is not), and state (Active
// when GraphAccepted, KindReady and ControllerReady are all True, as kro
// has it: the kind is served; else Inactive). A deleting message, when
// set, makes Ready False with reason Deleting.
func summarize(st *krov1a1.ResourceGraphDefinitionStatus, generation int64, now metav1.Time, deleting string) {
	var notTrue []string
	for _, t := range conditionTypes {
		c := findCondition(st.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			msg := "not reported yet"
			if c != nil && c.Message != nil {
				msg = *c.Message
			}
			notTrue = append(notTrue, fmt.Sprintf("%s: %s", t, msg))
		}
	}
	st.State = krov1a1.ResourceGraphDefinitionStateActive
	if len(notTrue) > 0 {
		st.State = krov1a1.ResourceGraphDefinitionStateInactive
	}
	switch {
	case deleting != "":
		setCondition(&st.Conditions, krov1a1.ConditionReady, metav1.ConditionFalse, ReasonDeleting, deleting, generation, now)
	case len(notTrue) > 0:
		setCondition(&st.Conditions, krov1a1.ConditionReady, metav1.ConditionFalse, ReasonNotReady, strings.Join(notTrue, "; "), generation, now)
	default:
		setCondition(&st.Conditions, krov1a1.ConditionReady, metav1.ConditionTrue, ReasonReady, "resource graph accepted, kind served, controller running", generation, now)
	}
	sort.SliceStable(st.Conditions, func(i, j int) bool {
		return conditionRank(st.Conditions[i].Type) < conditionRank(st.Conditions[j].Type)
	})
}

func conditionRank(t krov1a1.ConditionType) int {
	for i, c := range conditionTypes {
		if c == t {
			return i
		}
	}
	if t == krov1a1.ConditionReady {
		return len(conditionTypes)
	}
	return len(conditionTypes) + 1
}

// graphStatus returns status.topologicalOrder and status.resources of a
// graph: the ids in creation order, and each resource (in declaration
// order) with the resources it depends on.
func graphStatus(g *rgd.Graph) ([]string, []krov1a1.ResourceInformation) {
	if g == nil {
		return nil, nil
	}
	order := append([]string(nil), g.Order...)
	var res []krov1a1.ResourceInformation
	for _, n := range g.Nodes {
		ri := krov1a1.ResourceInformation{ID: n.ID}
		for _, d := range n.DependsOn {
			ri.Dependencies = append(ri.Dependencies, krov1a1.Dependency{ID: d})
		}
		res = append(res, ri)
	}
	return order, res
}

// controllerCondition sums up the status of an RGD's running Operator
// (operator.Runtime.Status) as the RGD's ControllerReady: True (Running)
// when every controller runs, whatever its own Ready condition says (a
// failing write for one instance is that instance's business, as in kro,
// where ControllerReady says the instance controller is registered); False
// with reason Starting while one is still starting, or FailedToStart
// naming the first controller that failed to start and why.
func controllerCondition(st opv1a1.OperatorStatus, running map[string]bool) (metav1.ConditionStatus, string, string) {
	var degraded []string
	for _, cs := range st.Controllers {
		c := meta.FindStatusCondition(cs.Conditions, "Ready")
		if running[cs.Name] {
			if c != nil && c.Status != metav1.ConditionTrue {
				degraded = append(degraded, fmt.Sprintf("controller %s: %s: %s", cs.Name, c.Reason, c.Message))
			}
			continue
		}
		if c != nil && c.Reason == operator.ReasonStarting {
			return metav1.ConditionFalse, ReasonStarting, fmt.Sprintf("controller %s: %s", cs.Name, c.Message)
		}
		msg := "did not start"
		if c != nil {
			msg = c.Message
		}
		return metav1.ConditionFalse, ReasonFailedToStart, fmt.Sprintf("controller %s: %s", cs.Name, msg)
	}
	msg := "controller is running"
	if len(degraded) > 0 {
		msg += "; " + strings.Join(degraded, "; ")
		if len(msg) > 1024 {
			msg = msg[:1021] + "..."
		}
	}
	return metav1.ConditionTrue, ReasonRunning, msg
}
