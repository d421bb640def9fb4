package events

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type countRecorder struct{ n map[string]int }

func (c *countRecorder) Eventf(regarding, _ runtime.Object, _, _, _, _ string, _ ...any) {
	c.n[regarding.(*corev1.ConfigMap).Name]++
}

func (c *countRecorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, t, r, a, n string, args ...any) {
	c.Eventf(regarding, related, t, r, a, n, args...)
}

// TestLimitPerObject: each object gets its own burst; Events over it are
// dropped (the refill at 1/300 per second adds nothing within the test).
func TestLimitPerObject(t *testing.T) {
	c := &countRecorder{n: map[string]int{}}
	rec := Limit(c, DefaultQPS, 3)
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "1"}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", UID: "2"}}
	for i := 0; i < 10; i++ {
		rec.Eventf(a, nil, corev1.EventTypeWarning, "R", "A", "n")
	}
	rec.AnnotatedEventf(b, nil, nil, corev1.EventTypeWarning, "R", "A", "n")
	if c.n["a"] != 3 || c.n["b"] != 1 {
		t.Errorf("delivered %v, want a:3 b:1", c.n)
	}
	if Limit(c, 0, 3) != c || Limit(c, 1, 0) != c {
		t.Error("a zero rate or burst must leave the recorder unlimited")
	}
}
