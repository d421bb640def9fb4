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
)

func init() {
	metrics.Registry.MustRegister(syncsTotal, writesTotal)
}

// forgetMetrics drops the metric series of a stopped controller.
func forgetMetrics(controller string) {
	l := prometheus.Labels{"controller": controller}
	syncsTotal.DeletePartialMatch(l)
	writesTotal.DeletePartialMatch(l)
	hook.ForgetController(controller)
}
