package metacontroller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dcontroller/dcontroller/pkg/metacontroller/hook"
)

var (
	syncsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_metacontroller_syncs_total",
		Help: "Parent syncs of Metacontroller-compatible controllers by controller and result (synced, skipped, failed).",
	}, []string{"controller", "result"})
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_metacontroller_writes_total",
		Help: "Writes to the API server by controller and verb (create, update, delete, patch, status).",
	}, []string{"controller", "verb"})
	readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dcontroller_metacontroller_ready",
		Help: "1 when a CompositeController or DecoratorController runs (started, its informers synced), 0 when its last start failed.",
	}, []string{"controller"})
)

// syncResults and writeVerbs are the values of the result label of
// syncsTotal and of the verb label of writesTotal.
var (
	syncResults = []string{"synced", "skipped", "failed"}
	writeVerbs  = []string{"create", "update", "delete", "patch", "status"}
)

func init() {
	metrics.Registry.MustRegister(syncsTotal, writesTotal, readyGauge)
}

// startedMetrics creates the series of a controller that has just started
// (its informers synced, its workers running) at 0, its hooks' included
// (hook.InitController), and sets its ready gauge to 1: a quiet
// controller is on every chart from its start, as controller-runtime does
// for its own controllers. forgetMetrics removes them when it stops.
func startedMetrics(controller string, hooks ...hook.Caller) {
	for _, r := range syncResults {
		syncsTotal.WithLabelValues(controller, r)
	}
	for _, v := range writeVerbs {
		writesTotal.WithLabelValues(controller, v)
	}
	hook.InitController(hooks...)
	readyGauge.WithLabelValues(controller).Set(1)
}

// startFailedMetrics records that the start of controller failed: its
// ready gauge is 0 (it has no other series) until a start succeeds or the
// controller object goes (forgetMetrics).
func startFailedMetrics(controller string) {
	readyGauge.WithLabelValues(controller).Set(0)
}

// forgetMetrics drops the metric series of a stopped controller.
func forgetMetrics(controller string) {
	l := prometheus.Labels{"controller": controller}
	syncsTotal.DeletePartialMatch(l)
	writesTotal.DeletePartialMatch(l)
	readyGauge.DeletePartialMatch(l)
	hook.ForgetController(controller)
}
