package operator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMergeConditionsTransitionTime: Ready's lastTransitionTime is the
// time its status last flipped, also when it flips while the controller
// runs (a write starts failing, then succeeds again), not the time of the
// controller's start that the runtime reports; a change of reason or
// message without a flip keeps it, and the caller's conditions are not
// changed in place.
func TestMergeConditionsTransitionTime(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: reason, LastTransitionTime: started}}
	}
	at := func(min int) time.Time { return started.Add(time.Duration(min)*time.Minute + 300*time.Millisecond) }
	// First status: the runtime's time.
	conds := mergeConditions(nil, ready(metav1.ConditionTrue, ReasonReady), at(1))
	if got := conds[0].LastTransitionTime; !got.Equal(&started) {
		t.Fatalf("first condition: lastTransitionTime %v, want the start's %v", got, started)
	}
	// A write starts failing 5 minutes later: a flip, now.
	prev := conds
	conds = mergeConditions(prev, ready(metav1.ConditionFalse, ReasonWriteFailed), at(5))
	if got, want := conds[0].LastTransitionTime.Time, at(5).Truncate(time.Second); !got.Equal(want) || conds[0].Reason != ReasonWriteFailed {
		t.Fatalf("after the flip to False: %v %s, want %v", got, conds[0].Reason, want)
	}
	if prev[0].Status != metav1.ConditionTrue {
		t.Fatal("the previous conditions were changed in place")
	}
	// Another reason, still False: kept.
	conds = mergeConditions(conds, ready(metav1.ConditionFalse, ReasonPipelineError), at(7))
	if got, want := conds[0].LastTransitionTime.Time, at(5).Truncate(time.Second); !got.Equal(want) || conds[0].Reason != ReasonPipelineError {
		t.Fatalf("a new reason without a flip: %v %s, want %v", got, conds[0].Reason, want)
	}
	// Back to True: now again.
	conds = mergeConditions(conds, ready(metav1.ConditionTrue, ReasonReady), at(9))
	if got, want := conds[0].LastTransitionTime.Time, at(9).Truncate(time.Second); !got.Equal(want) {
		t.Fatalf("after the flip back to True: %v, want %v", got, want)
	}
}
