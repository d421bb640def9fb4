package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
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
		Help: "Target writes by operation (create, update, patch, apply, delete; update-status, patch-status, apply-status on the status subresource) and result (success, error).",
	}, []string{"operator", "controller", "operation", "result"})
	// TargetSkipped counts writes skipped because the target already held
	// the desired state.
	TargetSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_target_writes_skipped_total",
		Help: "Target writes skipped because the target already held the desired state.",
	}, []string{"operator", "controller"})
	// TargetLiveReads counts the reads of a target object from the API
	// server itself, past the informer cache, for the managedFields it
	// drops: the hand-off of externalFields, adoption Create and
	// deletionPolicy Orphan of an Applier. The series appears with the
	// first read.
	TargetLiveReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_target_live_reads_total",
		Help: "Reads of a target object's managedFields from the API server (externalFields hand-off, adoption Create or deletionPolicy Orphan of an Applier).",
	}, []string{"operator", "controller"})
	// Errors counts errors by kind: pipeline (evaluation), output (an
	// output object without a name, or several outputs for one object),
	// write (a failed target write).
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_errors_total",
		Help: "Controller errors by kind (pipeline, output, write).",
	}, []string{"operator", "controller", "kind"})
	// Ready is 1 while a controller runs (started: its sources' informers
	// synced and its initial state reconciled) and 0 while it starts or
	// when its start failed (invalid, or retried with backoff); the series
	// exists from the operator's start to its stop.
	Ready = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dcontroller_controller_ready",
		Help: "1 when a controller of an operator runs (started, its sources synced), 0 while it starts or when its start failed.",
	}, []string{"operator", "controller"})
)

// errorKinds are the values of the kind label of Errors.
var errorKinds = []string{"pipeline", "output", "write"}

func init() {
	metrics.Registry.MustRegister(DeltasIn, DeltasOut, PipelineSeconds, TargetWrites, TargetSkipped, TargetLiveReads, Errors, Ready)
}

// writeOperations are the operation label values of TargetWrites that a
// target of type t may count (see Controller.write): an Updater creates,
// updates and deletes; a Patcher patches; an Applier applies (a view or an
// offline store: creates and patches). "" is Updater.
func writeOperations(t opv1a1.TargetType) []string {
	switch t {
	case opv1a1.Patcher:
		return []string{"patch"}
	case opv1a1.Applier:
		return []string{"apply", "create", "patch"}
	default:
		return []string{"create", "update", "delete"}
	}
}

// InitMetrics creates the series of one controller of operator, whose
// targets have the types targets, at 0 (Ready included), so that a controller that
// has seen no change yet is on every chart as a quiet one, as
// controller-runtime does for its own controllers: the counters without
// other labels, Errors for each kind, TargetWrites for each operation of
// each target's type (writeOperations) and result, and an empty
// PipelineSeconds histogram. DeleteMetrics removes them.
func InitMetrics(operator, controller string, targets ...opv1a1.TargetType) {
	DeltasIn.WithLabelValues(operator, controller)
	DeltasOut.WithLabelValues(operator, controller)
	PipelineSeconds.WithLabelValues(operator, controller)
	TargetSkipped.WithLabelValues(operator, controller)
	for _, k := range errorKinds {
		Errors.WithLabelValues(operator, controller, k)
	}
	for _, t := range targets {
		for _, op := range writeOperations(t) {
			for _, result := range []string{"success", "error"} {
				TargetWrites.WithLabelValues(operator, controller, op, result)
			}
		}
	}
	Ready.WithLabelValues(operator, controller).Set(0)
}

// SetReady sets the Ready gauge of one controller: 1 when it runs, 0
// otherwise.
func SetReady(operator, controller string, ready bool) {
	v := 0.0
	if ready {
		v = 1
	}
	Ready.WithLabelValues(operator, controller).Set(v)
}

// DeleteMetrics removes the series of one controller (when it stops).
func DeleteMetrics(operator, controller string) {
	labels := prometheus.Labels{"operator": operator, "controller": controller}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{DeltasIn, DeltasOut, PipelineSeconds, TargetWrites, TargetSkipped, TargetLiveReads, Errors, Ready} {
		v.DeletePartialMatch(labels)
	}
}
