package events

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Per-object Event rate defaults: client-go's core/v1 Event correlator
// (record.EventSourceObjectSpamFilter) and Metacontroller's --events-qps
// and --events-burst use the same ones, one Event per 5 minutes after a
// burst of 25.
const (
	DefaultQPS   = 1.0 / 300
	DefaultBurst = 25
)

// limiterCacheSize is how many objects have a token bucket at once; the
// least recently used is forgotten first (client-go's correlator keeps as
// many).
const limiterCacheSize = 4096

// Limit returns rec with the Events about each object (the regarding
// object: kind, namespace, name and UID) bounded by a token bucket of qps
// Events a second and burst: an Event over the bound is dropped. This is
// the bound client-go's core/v1 Event correlator puts on each object, for
// the events.k8s.io recorders that have none. qps <= 0 or burst <= 0
// returns rec unchanged.
func Limit(rec recorder.EventRecorder, qps float64, burst int) recorder.EventRecorder {
	if qps <= 0 || burst <= 0 {
		return rec
	}
	return &limited{rec: rec, qps: float32(qps), burst: burst, buckets: lru.New(limiterCacheSize)}
}

type limited struct {
	rec     recorder.EventRecorder
	qps     float32
	burst   int
	mu      sync.Mutex
	buckets *lru.Cache
}

// allow takes a token from the bucket of obj.
func (l *limited) allow(obj runtime.Object) bool {
	key := "?"
	if obj != nil {
		gvk := obj.GetObjectKind().GroupVersionKind()
		key = gvk.GroupKind().String()
		if m, err := meta.Accessor(obj); err == nil {
			key = fmt.Sprintf("%s/%s/%s/%s", key, m.GetNamespace(), m.GetName(), m.GetUID())
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b flowcontrol.PassiveRateLimiter
	if v, ok := l.buckets.Get(key); ok {
		b = v.(flowcontrol.PassiveRateLimiter)
	} else {
		b = flowcontrol.NewTokenBucketPassiveRateLimiter(l.qps, l.burst)
		l.buckets.Add(key, b)
	}
	return b.TryAccept()
}

func (l *limited) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if l.allow(regarding) {
		l.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

func (l *limited) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	if l.allow(regarding) {
		l.rec.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
	}
}
