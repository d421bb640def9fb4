package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// statusNow is the fixed "now" of the ring tests.
var statusNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// memberLease is the member Lease of identity in namespace/ring, renewed
// ago before statusNow (never when ago < 0) for 15s.
func memberLease(ns, ring, identity string, ago time.Duration, stats, addr string) coordinationv1.Lease {
	le := coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: ring + "-member-" + identity, Namespace: ns,
			Labels:      map[string]string{sharding.LabelRing: ring, sharding.LabelRole: "member"},
			Annotations: map[string]string{},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(identity), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	if ago >= 0 {
		le.Spec.RenewTime = &metav1.MicroTime{Time: statusNow.Add(-ago)}
	}
	if stats != "" {
		le.Annotations[sharding.AnnotationStats] = stats
	}
	if addr != "" {
		le.Annotations[sharding.AnnotationAddress] = addr
	}
	return le
}

// bucketLeases are the Leases of buckets from..to (inclusive) of
// namespace/ring, held by holder (nil: holderIdentity unset).
func bucketLeases(ns, ring string, from, to int, holder *string) []coordinationv1.Lease {
	var out []coordinationv1.Lease
	for b := from; b <= to; b++ {
		out = append(out, coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-bucket-%02d", ring, b), Namespace: ns,
				Labels: map[string]string{sharding.LabelRing: ring, sharding.LabelRole: "bucket"},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: holder},
		})
	}
	return out
}

func TestPrintStatusRings(t *testing.T) {
	ready := []opv1a1.ControllerStatus{{
		Name:       "c",
		Conditions: []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready"}},
		Counters:   opv1a1.Counters{Deltas: 5, Writes: 2},
	}}
	// Name buckets (sharding.NameBucket) of the operators: a-op-56 24, b-op-0 40, c-new-3 35.
	ops := []opv1a1.Operator{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-op-56"}, Status: opv1a1.OperatorStatus{Controllers: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b-op-0"}, Status: opv1a1.OperatorStatus{Controllers: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c-new-3"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ns-op"}, Spec: opv1a1.OperatorSpec{Sharding: opv1a1.ShardByNamespace},
			Status: opv1a1.OperatorStatus{Controllers: ready}},
	}
	const ns, ring = "dcontroller-system", "dcontroller"
	// a holds 0-9,30-40; b holds 10-23,25-29,41-60; 24 is free (holder
	// ""), 61 too (holder unset), 62 has no Lease, 63 is held by "gone",
	// which has no member Lease.
	var one []coordinationv1.Lease
	one = append(one,
		memberLease(ns, ring, "b", 27*time.Second, `not json`, ""),
		memberLease(ns, ring, "a", 5*time.Second, `{"operators":2,"syncs":5,"watchEvents":120}`, "10.0.0.7:8443"))
	one = append(one, bucketLeases(ns, ring, 0, 9, ptr.To("a"))...)
	one = append(one, bucketLeases(ns, ring, 10, 23, ptr.To("b"))...)
	one = append(one, bucketLeases(ns, ring, 24, 24, ptr.To(""))...)
	one = append(one, bucketLeases(ns, ring, 25, 29, ptr.To("b"))...)
	one = append(one, bucketLeases(ns, ring, 30, 40, ptr.To("a"))...)
	one = append(one, bucketLeases(ns, ring, 41, 60, ptr.To("b"))...)
	one = append(one, bucketLeases(ns, ring, 61, 61, nil)...)
	one = append(one, bucketLeases(ns, ring, 63, 63, ptr.To("gone"))...)

	// A second ring "blue" in namespace "other": member "solo" holds every
	// bucket; its Lease has no holderIdentity and was never renewed.
	solo := memberLease("other", "blue", "solo", -1, `{"operators":4}`, "")
	solo.Spec.HolderIdentity = nil
	two := append([]coordinationv1.Lease{solo}, one...)
	two = append(two, bucketLeases("other", "blue", 0, 63, ptr.To("solo"))...)
	// A Lease without the ring label is not part of any ring.
	two = append(two, coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"}})

	for _, tc := range []struct {
		name   string
		leases []coordinationv1.Lease
		want   string
	}{{
		name: "no ring",
		want: `
OPERATOR  CONTROLLER  READY    REASON  DELTAS  WRITES  WRITE-ERRORS  LAST ERROR
a-op-56   c           True     Ready   5       2       0             -
b-op-0    c           True     Ready   5       2       0             -
c-new-3   -           Unknown  -       -       -       -             -
ns-op     c           True     Ready   5       2       0             -
`,
	}, {
		name:   "one ring",
		leases: one,
		want: `
OPERATOR  CONTROLLER  READY    REASON  DELTAS  WRITES  WRITE-ERRORS  MEMBER        LAST ERROR
a-op-56   c           True     Ready   5       2       0             -             -
b-op-0    c           True     Ready   5       2       0             a             -
c-new-3   -           Unknown  -       -       -       -             a             -
ns-op     c           True     Ready   5       2       0             by namespace  -

RING                            MEMBER  LIVE                  BUCKETS                 OPERATORS  SYNCS  WATCH EVENTS  ADDRESS
dcontroller-system/dcontroller  a       yes                   21 (0-9,30-40)          2          5      120           10.0.0.7:8443
dcontroller-system/dcontroller  b       no (expired 12s ago)  39 (10-23,25-29,41-60)  -          -      -             -
dcontroller-system/dcontroller  gone    no (no member lease)  1 (63)                  -          -      -             -
unassigned: 3 (24,61-62)
`,
	}, {
		name:   "two rings",
		leases: two,
		want: `
OPERATOR  CONTROLLER  READY    REASON  DELTAS  WRITES  WRITE-ERRORS  MEMBER                                            LAST ERROR
a-op-56   c           True     Ready   5       2       0             dcontroller-system/dcontroller=-,other/blue=solo  -
b-op-0    c           True     Ready   5       2       0             dcontroller-system/dcontroller=a,other/blue=solo  -
c-new-3   -           Unknown  -       -       -       -             dcontroller-system/dcontroller=a,other/blue=solo  -
ns-op     c           True     Ready   5       2       0             by namespace                                      -

RING                            MEMBER  LIVE                  BUCKETS                 OPERATORS  SYNCS  WATCH EVENTS  ADDRESS
dcontroller-system/dcontroller  a       yes                   21 (0-9,30-40)          2          5      120           10.0.0.7:8443
dcontroller-system/dcontroller  b       no (expired 12s ago)  39 (10-23,25-29,41-60)  -          -      -             -
dcontroller-system/dcontroller  gone    no (no member lease)  1 (63)                  -          -      -             -
unassigned: 3 (24,61-62)

RING        MEMBER  LIVE                BUCKETS    OPERATORS  SYNCS  WATCH EVENTS  ADDRESS
other/blue  solo    no (never renewed)  64 (0-63)  4          -      -             -
`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printStatus(&b, append([]opv1a1.Operator(nil), ops...), ringsFromLeases(tc.leases), statusNow, false); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestPrintStatusRingsColour(t *testing.T) {
	leases := []coordinationv1.Lease{
		memberLease("ns", "r", "up", time.Second, "", ""),
		memberLease("ns", "r", "down", time.Minute, "", ""),
	}
	var b bytes.Buffer
	if err := printStatus(&b, nil, ringsFromLeases(leases), statusNow, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\x1b[32myes\x1b[0m", "\x1b[31mno (expired 45s ago)\x1b[0m", "unassigned: 64 (0-63)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%q", want, b.String())
		}
	}
}
