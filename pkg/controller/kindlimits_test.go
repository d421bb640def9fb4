package controller

import (
	"fmt"
	"strings"
	"testing"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

func viewTargets(kinds ...string) []opv1a1.Target {
	out := make([]opv1a1.Target, len(kinds))
	for i, k := range kinds {
		out[i] = opv1a1.Target{Resource: opv1a1.Resource{Kind: k}}
	}
	return out
}

func TestKindLimitErrors(t *testing.T) {
	apps, other := "apps", "other.view.dcontroller.io"
	specs := []opv1a1.Controller{
		// 0: A, B, C (3 kinds).
		{Name: "c0", Sources: []opv1a1.Source{{Resource: opv1a1.Resource{Kind: "A"}}}, Targets: viewTargets("B", "C")},
		// 1: three targets, over 2.
		{Name: "c1", Targets: viewTargets("D", "E", "F")},
		// 2: kinds named before and a native kind add nothing.
		{Name: "c2", Sources: []opv1a1.Source{{Resource: opv1a1.Resource{Kind: "Deployment", APIGroup: &apps}}},
			Target: &opv1a1.Target{Resource: opv1a1.Resource{Kind: "A"}}},
		// 3: D is the 4th kind, another operator's view the 5th: over 4.
		{Name: "c3", Sources: []opv1a1.Source{{Resource: opv1a1.Resource{Kind: "X", APIGroup: &other}}},
			Targets: viewTargets("D")},
		// 4: the 4th kind, counted as if 3 were absent.
		{Name: "c4", Target: &opv1a1.Target{Resource: opv1a1.Resource{Kind: "D"}}},
		// 5: the 5th.
		{Name: "c5", Target: &opv1a1.Target{Resource: opv1a1.Resource{Kind: "G"}}},
	}
	errs := KindLimitErrors("op", specs, KindLimits{MaxTargets: 2, MaxViewKinds: 4})
	want := map[int]string{
		1: `spec.controllers[1].targets: Too many: 3: must have at most 2 targets (dctl --max-targets)`,
		3: `spec.controllers[3].targets[0].kind: view kind "D" would be the operator's view kind number 5, over the limit of 4 (dctl --max-view-kinds)`,
		5: `spec.controllers[5].target.kind: view kind "G" would be the operator's view kind number 5, over the limit of 4 (dctl --max-view-kinds)`,
	}
	if len(errs) != len(want) {
		t.Errorf("errors %v, want %d", errs, len(want))
	}
	for i, w := range want {
		if errs[i] == nil || errs[i].Error() != w {
			t.Errorf("controller %d: %v, want %s", i, errs[i], w)
		}
	}
	if errs := KindLimitErrors("op", specs, KindLimits{MaxTargets: -1, MaxViewKinds: -1}); len(errs) != 0 {
		t.Errorf("no bounds: %v", errs)
	}
	// The defaults: 2000 targets of one controller are refused, and so is
	// the view kind number 257 of one operator.
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf("View%04d", i)
	}
	errs = KindLimitErrors("op", []opv1a1.Controller{{Name: "all", Targets: viewTargets(many...)}}, KindLimits{})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "Too many: 2000: must have at most 64 targets") {
		t.Errorf("2000 targets: %v", errs[0])
	}
	var one []opv1a1.Controller
	for i := 0; i < 300; i++ {
		one = append(one, opv1a1.Controller{Name: many[i], Target: &opv1a1.Target{Resource: opv1a1.Resource{Kind: many[i]}}})
	}
	errs = KindLimitErrors("op", one, KindLimits{})
	if len(errs) != 300-DefaultMaxViewKinds || errs[DefaultMaxViewKinds-1] != nil || errs[DefaultMaxViewKinds] == nil {
		t.Errorf("300 controllers of one view kind each: %d errors, first %v", len(errs), errs[DefaultMaxViewKinds])
	}
}
