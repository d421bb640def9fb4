package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

// budgetOperator (in group of operator "sweep", whose Widgets putWidget
// writes) evaluates, for each Widget, a condition on every pair of
// elements of its list: size² steps. sizes copies the size.
const budgetOperator = `    - name: pairs
      sources: [{kind: Widget}]
      pipeline:
        "@project":
          metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
          ok: {"@all": [{"@all": [{"@gte": ["$$", 0]}, {"@range": "$.size"}]}, {"@range": "$.size"}]}
      target: {kind: PairView}
    - name: sizes
      sources: [{kind: Widget}]
      pipeline:
        "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, size: "$.size"}
      target: {kind: SizeView}
`

// An object whose evaluation exceeds the budget is reported in the
// controller's status (PipelineError, with the expression's path) while
// the controller's other objects and the operator's other controllers run
// on.
func TestEvalBudgetReportedPerObject(t *testing.T) {
	rt := NewRuntime(RuntimeOptions{Logger: logr.Discard(), EvalLimits: expression.Limits{Steps: 100000}})
	defer rt.Stop()
	putWidget(t, rt, "small", 10)
	putWidget(t, rt, "large", 1000) // a million steps
	op := sweepOperator(t, 1, budgetOperator)
	rt.Upsert(context.Background(), op)
	waitViews(t, rt, "PairView", "small")
	waitViews(t, rt, "SizeView", "large,small")
	st, ok := rt.Status("sweep", 1)
	if !ok {
		t.Fatal("no status")
	}
	want := `spec.controllers[0].pipeline["@project"].ok["@all"][0]["@all"]: @all: evaluation exceeded its budget of 100000 steps (document default/large)`
	var found bool
	for _, cs := range st.Controllers {
		cond := cs.Conditions[0]
		switch cs.Name {
		case "pairs":
			found = true
			if cond.Reason != ReasonPipelineError || !strings.Contains(cond.Message, want) {
				t.Errorf("pairs: %s: %s, want %s with %q", cond.Reason, cond.Message, ReasonPipelineError, want)
			}
			if len(cs.LastErrors) == 0 || !strings.Contains(cs.LastErrors[len(cs.LastErrors)-1].Message, want) {
				t.Errorf("pairs: last errors %v", cs.LastErrors)
			}
		case "sizes":
			if cond.Reason != ReasonReady {
				t.Errorf("sizes: %s: %s", cond.Reason, cond.Message)
			}
		}
	}
	if !found {
		t.Fatalf("no status of controller pairs: %+v", st)
	}
}

// Deleting an operator stops the evaluation it has in progress: Delete
// returns within a second although the evaluation, without a budget, would
// take minutes.
func TestDeleteCancelsEvaluation(t *testing.T) {
	unbounded := expression.Limits{Steps: -1, Values: -1, Bytes: -1}
	rt := NewRuntime(RuntimeOptions{Logger: logr.Discard(), EvalLimits: unbounded})
	defer rt.Stop()
	putWidget(t, rt, "huge", 30000) // 9·10⁸ steps
	// The start of the operator runs the first batch of each controller:
	// Upsert returns once the evaluation ends.
	upserted := make(chan bool, 1)
	go func() { upserted <- rt.Upsert(context.Background(), sweepOperator(t, 1, budgetOperator)) }()
	waitViews(t, rt, "SizeView", "huge")
	// The pairs controller works on its first batch; give it time to be
	// well inside the evaluation.
	time.Sleep(300 * time.Millisecond)
	if got := viewNames(rt, "PairView"); got != "" {
		t.Fatalf("the evaluation ended already: PairView holds %q", got)
	}
	// The status says what the start is doing.
	if r, m := readyReason(t, rt, "sweep", "pairs"); r != ReasonStarting || !strings.Contains(m, "running the pipeline on the initial state (source objects: 1)") {
		t.Errorf("pairs while its first batch runs: reason %s (%s)", r, m)
	}
	within(t, time.Second, "Delete", func() { rt.Delete("sweep") })
	select {
	case <-upserted:
	case <-time.After(time.Second):
		t.Fatal("Upsert did not return within a second of Delete")
	}
	if names := rt.Names(); len(names) != 0 {
		t.Fatalf("operators still running: %v", names)
	}
	// Nothing of the cancelled run was written.
	if got := viewNames(rt, "PairView"); got != "" {
		t.Fatalf("PairView holds %q after the operator was deleted", got)
	}
}
