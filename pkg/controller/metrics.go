package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics of declarative controllers, registered in
// controller-runtime's registry (served on the manager's --metrics-addr).
// Every series has the labels operator and controller.
var (
	// DeltasIn counts source changes fed to the pipeline (objects added,
	// updated or removed from a source).
	DeltasIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_deltas_in_total",
		Help: "Source changes processed by a controller's pipeline.",
	}, []string{"operator", "controller"})
	// DeltasOut counts the weighted entries of the pipeline's output deltas.
	DeltasOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_deltas_out_total",
		Help: "Entries of the output deltas a controller's pipeline produced.",
	}, []string{"operator", "controller"})
	// PipelineSeconds observes one pipeline run (one batch of changes), in seconds.
	PipelineSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dcontroller_pipeline_duration_seconds",
		Help:    "Time to run a controller's pipeline over one batch of source changes, in seconds.",
		Buckets: prometheus.ExponentialBuckets(5e-6, 4, 10), // 5µs .. ~1.3s
	}, []string{"operator", "controller"})
	// TargetWrites counts target API calls by operation (create, update,
	// patch, apply, delete) and result (success, error).
	TargetWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_target_writes_total",
		Help: "Target writes by operation (create, update, patch, apply, delete) and result (success, error).",
	}, []string{"operator", "controller", "operation", "result"})
	// TargetSkipped counts writes skipped because the target already held
	// the desired state.
	TargetSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_target_writes_skipped_total",
		Help: "Target writes skipped because the target already held the desired state.",
	}, []string{"operator", "controller"})
	// Errors counts errors by kind: pipeline (evaluation), output (an
	// output object without a name, or several outputs for one object),
	// write (a failed target write).
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_errors_total",
		Help: "Controller errors by kind (pipeline, output, write).",
	}, []string{"operator", "controller", "kind"})
)

func init() {
	metrics.Registry.MustRegister(DeltasIn, DeltasOut, PipelineSeconds, TargetWrites, TargetSkipped, Errors)
}

// DeleteMetrics removes the series of one controller (when it stops).
func DeleteMetrics(operator, controller string) {
	labels := prometheus.Labels{"operator": operator, "controller": controller}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{DeltasIn, DeltasOut, PipelineSeconds, TargetWrites, TargetSkipped, Errors} {
		v.DeletePartialMatch(labels)
	}
}
