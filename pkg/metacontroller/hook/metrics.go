package hook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	callsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_metacontroller_hook_calls_total",
		Help: "Hook calls of Metacontroller-compatible controllers, by controller (<kind>/<name>) and hook (sync, finalize, customize).",
	}, []string{"controller", "hook"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_metacontroller_hook_errors_total",
		Help: "Failed hook calls, by controller, hook and reason (Timeout, Unavailable, HTTPStatus, InvalidResponse, Config, Evaluation).",
	}, []string{"controller", "hook", "reason"})
	duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dcontroller_metacontroller_hook_duration_seconds",
		Help:    "Latency of hook calls in seconds, by controller, hook and type (webhook, pipeline).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"controller", "hook", "type"})
)

func init() {
	metrics.Registry.MustRegister(callsTotal, errorsTotal, duration)
}

// ForgetController drops the metric series of a stopped controller
// ("<kind>/<name>"), so that a deleted controller leaves none behind.
func ForgetController(controller string) {
	l := prometheus.Labels{"controller": controller}
	callsTotal.DeletePartialMatch(l)
	errorsTotal.DeletePartialMatch(l)
	duration.DeletePartialMatch(l)
}
