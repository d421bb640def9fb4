package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gathered returns the series of controller-runtime's registry whose
// labels include operator="op", as `name{label="value",...}` (labels
// sorted) with their value: a counter's or gauge's value, a histogram's
// sample count.
func gathered(t *testing.T, op string) map[string]float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			mine := false
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				mine = mine || l.GetName() == "operator" && l.GetValue() == op
			}
			if !mine {
				continue
			}
			sort.Strings(labels)
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// An operator's controllers have their series at 0 from its start, the
// ready gauge says which run, and the series go with a controller that a
// new generation removes and with the operator.
func TestMetricsFromStart(t *testing.T) {
	c := newHangingCache()
	rt := NewRuntime(RuntimeOptions{Cache: c, Logger: logr.Discard()})
	defer rt.Stop()
	startHanging(t, rt, c, decodeOperator(t, stuckOperator))
	want := map[string]float64{
		`dcontroller_controller_ready{controller="fine",operator="stuck"}`:                                         1,
		`dcontroller_controller_ready{controller="hangs",operator="stuck"}`:                                        0,
		`dcontroller_deltas_in_total{controller="fine",operator="stuck"}`:                                          0,
		`dcontroller_deltas_out_total{controller="fine",operator="stuck"}`:                                         0,
		`dcontroller_pipeline_duration_seconds{controller="fine",operator="stuck"}`:                                0,
		`dcontroller_target_writes_skipped_total{controller="fine",operator="stuck"}`:                              0,
		`dcontroller_errors_total{controller="fine",kind="output",operator="stuck"}`:                               0,
		`dcontroller_target_writes_total{controller="fine",operation="update",operator="stuck",result="error"}`:    0,
		`dcontroller_target_writes_total{controller="hangs",operation="create",operator="stuck",result="success"}`: 0,
		`dcontroller_target_writes_total{controller="hangs",operation="delete",operator="stuck",result="success"}`: 0,
		`dcontroller_errors_total{controller="hangs",kind="pipeline",operator="stuck"}`:                            0,
		`dcontroller_deltas_in_total{controller="hangs",operator="stuck"}`:                                         0,
		`dcontroller_pipeline_duration_seconds{controller="hangs",operator="stuck"}`:                               0,
		`dcontroller_target_writes_skipped_total{controller="hangs",operator="stuck"}`:                             0,
		`dcontroller_deltas_out_total{controller="hangs",operator="stuck"}`:                                        0,
		`dcontroller_errors_total{controller="hangs",kind="write",operator="stuck"}`:                               0,
		`dcontroller_target_writes_total{controller="fine",operation="create",operator="stuck",result="success"}`:  0,
		`dcontroller_errors_total{controller="fine",kind="pipeline",operator="stuck"}`:                             0,
		`dcontroller_errors_total{controller="fine",kind="write",operator="stuck"}`:                                0,
		`dcontroller_target_writes_total{controller="fine",operation="delete",operator="stuck",result="error"}`:    0,
		`dcontroller_target_writes_total{controller="fine",operation="delete",operator="stuck",result="success"}`:  0,
		`dcontroller_target_writes_total{controller="fine",operation="update",operator="stuck",result="success"}`:  0,
		`dcontroller_target_writes_total{controller="fine",operation="create",operator="stuck",result="error"}`:    0,
		`dcontroller_errors_total{controller="hangs",kind="output",operator="stuck"}`:                              0,
		`dcontroller_target_writes_total{controller="hangs",operation="create",operator="stuck",result="error"}`:   0,
		`dcontroller_target_writes_total{controller="hangs",operation="delete",operator="stuck",result="error"}`:   0,
		`dcontroller_target_writes_total{controller="hangs",operation="update",operator="stuck",result="error"}`:   0,
		`dcontroller_target_writes_total{controller="hangs",operation="update",operator="stuck",result="success"}`: 0,
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := gathered(t, "stuck")
		var diff []string
		for s, v := range want {
			if g, ok := got[s]; !ok || g != v {
				diff = append(diff, fmt.Sprintf("%s = %v (present %v), want %v", s, g, ok, v))
			}
		}
		for s := range got {
			if _, ok := want[s]; !ok {
				diff = append(diff, "unexpected "+s)
			}
		}
		if len(diff) == 0 {
			break
		}
		if time.Now().After(deadline) {
			sort.Strings(diff)
			t.Fatalf("series of a started, quiet operator:\n%s", strings.Join(diff, "\n"))
		}
	}

	// A new generation without the controller that waits: its series go.
	op := decodeOperator(t, strings.Replace(stuckOperator, "generation: 1", "generation: 2", 1))
	op.Spec.Controllers = op.Spec.Controllers[:1]
	within(t, 5*time.Second, "Upsert of the new generation", func() { rt.Upsert(context.Background(), op) })
	got := gathered(t, "stuck")
	for s := range got {
		if strings.Contains(s, `controller="hangs"`) {
			t.Errorf("the removed controller's series %s is left", s)
		}
	}
	if got[`dcontroller_controller_ready{controller="fine",operator="stuck"}`] != 1 {
		t.Errorf("fine is not ready after the new generation: %v", got)
	}

	within(t, 5*time.Second, "Delete", func() { rt.Delete("stuck") })
	if got := gathered(t, "stuck"); len(got) > 0 {
		t.Errorf("series left after the operator's deletion: %v", got)
	}
}
