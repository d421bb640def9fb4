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

// InitController creates the series of the given hooks (Callers from New;
// nil ones are skipped) at 0: the call counter, the error counter of each
// reason the hook's type can report (a webhook: Timeout, Unavailable,
// HTTPStatus, InvalidResponse, Config; a pipeline: Evaluation,
// InvalidResponse) and an empty latency histogram. ForgetController drops
// them.
func InitController(callers ...Caller) {
	for _, c := range callers {
		var opts Options
		var typ string
		var reasons []string
		switch h := c.(type) {
		case *webhook:
			if h == nil {
				continue
			}
			opts, typ = h.opts, "webhook"
			reasons = []string{ReasonTimeout, ReasonUnavailable, ReasonHTTPStatus, ReasonInvalidResponse, ReasonConfig}
		case *pipeline:
			if h == nil {
				continue
			}
			opts, typ = h.opts, "pipeline"
			reasons = []string{ReasonEvaluation, ReasonInvalidResponse}
		default:
			continue
		}
		callsTotal.WithLabelValues(opts.Controller, opts.Hook)
		for _, r := range reasons {
			errorsTotal.WithLabelValues(opts.Controller, opts.Hook, r)
		}
		duration.WithLabelValues(opts.Controller, opts.Hook, typ)
	}
}

// ForgetController drops the metric series of a stopped controller
// ("<kind>/<name>"), so that a deleted controller leaves none behind.
func ForgetController(controller string) {
	l := prometheus.Labels{"controller": controller}
	callsTotal.DeletePartialMatch(l)
	errorsTotal.DeletePartialMatch(l)
	duration.DeletePartialMatch(l)
}
