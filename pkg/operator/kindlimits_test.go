package operator

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/dcontroller/dcontroller/pkg/controller"
)

const wideController = `    - name: wide
      sources: [{kind: Widget}]
      pipeline:
        - [{"@inputs": [Widget]}, {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}}, {"@output": A}]
        - [{"@inputs": [Widget]}, {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}}, {"@output": B}]
        - [{"@inputs": [Widget]}, {"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}}, {"@output": C}]
      targets: [{kind: A}, {kind: B}, {kind: C}]
`

// A controller over the kind limits is InvalidSpec with its path; the
// operator's other controllers run on. Within the limits the same
// controller runs.
func TestKindLimitsRefuseController(t *testing.T) {
	for _, lim := range []controller.KindLimits{{MaxTargets: 2}, {MaxViewKinds: 4}, {}} {
		rt := NewRuntime(RuntimeOptions{Logger: logr.Discard(), KindLimits: lim})
		ctx := context.Background()
		putWidget(t, rt, "w1", 10)
		rt.Upsert(ctx, sweepOperator(t, 1, sweepAll+wideController))
		waitViews(t, rt, "SizeView", "w1")
		st, _ := rt.Status("sweep", 1)
		if len(st.Controllers) != 2 {
			t.Fatalf("status: %+v", st)
		}
		if c := st.Controllers[0].Conditions[0]; c.Status != "True" {
			t.Errorf("%+v: sizes controller: %+v", lim, c)
		}
		c := st.Controllers[1].Conditions[0]
		want := map[controller.KindLimits]string{
			{MaxTargets: 2}:   "spec.controllers[1].targets: Too many: 3: must have at most 2 targets (dctl --max-targets)",
			{MaxViewKinds: 4}: `spec.controllers[1].targets[2].kind: view kind "C" would be the operator's view kind number 5, over the limit of 4 (dctl --max-view-kinds)`,
		}[lim]
		switch {
		case want == "":
			waitViews(t, rt, "C", "w1")
		case c.Reason != ReasonInvalidSpec || c.Message != want:
			t.Errorf("%+v: wide controller: %s %q, want InvalidSpec %q", lim, c.Reason, c.Message, want)
		}
		rt.Stop()
	}
}
