package operator

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// viewObjectsDesc describes dcontroller_view_objects: a gauge of the objects
// each operator's view kind holds, read from the view stores at scrape time.
var viewObjectsDesc = prometheus.NewDesc("dcontroller_view_objects",
	"Objects held in a view, by operator and view kind.", []string{"operator", "kind"}, nil)

type viewCollector struct {
	mu     sync.Mutex
	stores map[*view.Store]int // reference counts
}

var views = &viewCollector{stores: map[*view.Store]int{}}

// watchEventsTotal counts the objects the informers receive, by kind.
var watchEventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dcontroller_watch_events_total",
	Help: "Objects the manager's informers received from the Kubernetes API server (list items and watch events), by kind.",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(views, watchEventsTotal) }

func (v *viewCollector) add(s *view.Store) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stores[s]++
}

func (v *viewCollector) remove(s *view.Store) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stores[s]--; v.stores[s] <= 0 {
		delete(v.stores, s)
	}
}

func (v *viewCollector) Describe(ch chan<- *prometheus.Desc) { ch <- viewObjectsDesc }

func (v *viewCollector) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	stores := make([]*view.Store, 0, len(v.stores))
	for s := range v.stores {
		stores = append(stores, s)
	}
	v.mu.Unlock()
	type key struct{ op, kind string }
	sums := map[key]int{}
	for _, s := range stores {
		for gvk, n := range s.Counts() {
			if !opv1a1.IsViewGroup(gvk.Group) {
				continue
			}
			op := strings.TrimSuffix(gvk.Group, "."+opv1a1.ViewGroupSuffix)
			sums[key{op, gvk.Kind}] += n
		}
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(viewObjectsDesc, prometheus.GaugeValue, float64(n), k.op, k.kind)
	}
}
