package sharding

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics of the rings of this process, in controller-runtime's
// registry (served on the manager's metrics endpoint), labelled by ring.
var (
	membersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dcontroller_shard_members",
		Help: "Live members of the ring as this member sees them (itself included).",
	}, []string{"ring"})
	heldGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dcontroller_shard_buckets_held",
		Help: "Buckets this member works now.",
	}, []string{"ring"})
	handoversCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_shard_handovers_total",
		Help: "Buckets this member acquired or released.",
	}, []string{"ring", "direction"})
	renewFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcontroller_shard_lease_renew_failures_total",
		Help: "Failed renewals of this member's Lease.",
	}, []string{"ring"})
	registerOnce sync.Once
)

// ringMetrics are the metrics of one ring.
type ringMetrics struct {
	members, held                    prometheus.Gauge
	acquired, released, renewFailure prometheus.Counter
}

// metricsFor registers the metrics (once) and returns ring's.
func metricsFor(ring string) ringMetrics {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(membersGauge, heldGauge, handoversCounter, renewFailures)
	})
	return ringMetrics{
		members:      membersGauge.WithLabelValues(ring),
		held:         heldGauge.WithLabelValues(ring),
		acquired:     handoversCounter.WithLabelValues(ring, "acquired"),
		released:     handoversCounter.WithLabelValues(ring, "released"),
		renewFailure: renewFailures.WithLabelValues(ring),
	}
}
