package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	cond := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: "Ready", Status: s}}
	}
	for _, tc := range []struct {
		name        string
		controllers []ControllerStatus
		ready       string
		names       string
	}{
		{"none", nil, "0/0", ""},
		{"all ready", []ControllerStatus{{Name: "a", Conditions: cond(metav1.ConditionTrue)}, {Name: "b", Conditions: cond(metav1.ConditionTrue)}}, "2/2", "a,b"},
		{"one failing, one unknown", []ControllerStatus{
			{Name: "a", Conditions: cond(metav1.ConditionFalse)},
			{Name: "b", Conditions: cond(metav1.ConditionTrue)},
			{Name: "c"},
		}, "1/3", "a,b,c"},
	} {
		s := OperatorStatus{Controllers: tc.controllers}
		s.Summarize()
		if s.Ready != tc.ready || s.ControllerNames != tc.names {
			t.Errorf("%s: ready %q names %q, want %q %q", tc.name, s.Ready, s.ControllerNames, tc.ready, tc.names)
		}
	}
}
