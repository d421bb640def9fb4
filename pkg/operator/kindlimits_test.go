package operator

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/dcontroller/dcontroller/pkg/controller"
)

// A controller over the kind limits is InvalidSpec with its path; the
// operator's other controllers and the other operators run on.
func TestKindLimitsRefuseController(t *testing.T) {
	rt := NewRuntime(RuntimeOptions{Logger: logr.Discard(), KindLimits: controller.KindLimits{MaxTargets: 2}})
	defer rt.Stop()
	ctx := context.Background()
	putWidget(t, rt, "w1", 10)
	rt.Upsert(ctx, sweepOperator(t, 1, sweepAll+`    - name: wide
      sources: [{kind: Widget}]
      pipeline:
        "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}}
      targets: [{kind: A}, {kind: B}, {kind: C}]
`))
	waitViews(t, rt, "SizeView", "w1")
	st, _ := rt.Status("sweep", 1)
	if len(st.Controllers) != 2 {
		t.Fatalf("status: %+v", st)
	}
	c := st.Controllers[1].Conditions[0]
	if want := "spec.controllers[1].targets: Too many: 3: must have at most 2 targets (dctl --max-targets)"; c.Reason != ReasonInvalidSpec || c.Message != want {
		t.Errorf("wide controller: %s %q, want InvalidSpec %q", c.Reason, c.Message, want)
	}
	if c := st.Controllers[0].Conditions[0]; c.Status != "True" {
		t.Errorf("sizes controller: %+v", c)
	}
}
