package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/sharding"
)

// ringStatus is one ring of managers as its Leases describe it.
type ringStatus struct {
	// Namespace and Name of the ring: the namespace of its Leases and the
	// value of their sharding.LabelRing label.
	Namespace, Name string
	// Members sorted by identity: every member Lease, plus every holder of
	// a bucket that has no member Lease (HasLease false).
	Members []ringMember
	// Holders[b] is the holderIdentity of bucket b's Lease ("" when the
	// bucket is free or has no Lease yet).
	Holders [sharding.Buckets]string
}

// ringMember is one member of a ring.
type ringMember struct {
	Identity string
	// Address is the sharding.AnnotationAddress of its Lease ("" if none).
	Address string
	// HasLease: a member Lease names it (false for a bucket holder whose
	// member Lease is gone).
	HasLease bool
	// Expiry is renewTime + leaseDurationSeconds of its Lease; zero when
	// either is unset.
	Expiry time.Time
	// Held are the buckets whose Lease names it holder.
	Held sharding.BucketSet
	// Stats is the sharding.AnnotationStats JSON of its Lease; nil when
	// absent or not a JSON object of integers.
	Stats map[string]int64
}

// key returns "namespace/name", the ring's name in `dctl status`.
func (r *ringStatus) key() string { return r.Namespace + "/" + r.Name }

// free returns the buckets no member holds.
func (r *ringStatus) free() sharding.BucketSet {
	var s sharding.BucketSet
	for b, h := range r.Holders {
		if h == "" {
			s |= 1 << uint(b)
		}
	}
	return s
}

// ringsFromLeases groups leases (those labelled sharding.LabelRing) into
// rings by namespace and ring label, sorted by namespace then name. A
// Lease is a member Lease when its sharding.LabelRole is "member" (its
// identity is spec.holderIdentity, or else the part of its name after
// "<ring>-member-"), and bucket b's Lease when the role is "bucket" and its
// name is "<ring>-bucket-NN" with NN = b on two digits (the naming of
// pkg/sharding); other Leases of a ring only make the ring appear.
func ringsFromLeases(leases []coordinationv1.Lease) []ringStatus {
	byKey := map[string]*ringStatus{}
	members := map[string]map[string]*ringMember{}
	var keys []string
	get := func(le *coordinationv1.Lease) (*ringStatus, map[string]*ringMember) {
		r := &ringStatus{Namespace: le.Namespace, Name: le.Labels[sharding.LabelRing]}
		k := r.key()
		if byKey[k] == nil {
			byKey[k], members[k] = r, map[string]*ringMember{}
			keys = append(keys, k)
		}
		return byKey[k], members[k]
	}
	for i := range leases {
		le := &leases[i]
		if _, ok := le.Labels[sharding.LabelRing]; !ok {
			continue
		}
		r, ms := get(le)
		holder := ""
		if le.Spec.HolderIdentity != nil {
			holder = *le.Spec.HolderIdentity
		}
		switch le.Labels[sharding.LabelRole] {
		case "member":
			id := holder
			if id == "" {
				id = strings.TrimPrefix(le.Name, r.Name+"-member-")
			}
			m := ringMember{Identity: id, Address: le.Annotations[sharding.AnnotationAddress], HasLease: true}
			if le.Spec.RenewTime != nil && le.Spec.LeaseDurationSeconds != nil {
				m.Expiry = le.Spec.RenewTime.Add(time.Duration(*le.Spec.LeaseDurationSeconds) * time.Second)
			}
			if js := le.Annotations[sharding.AnnotationStats]; js != "" {
				if err := json.Unmarshal([]byte(js), &m.Stats); err != nil {
					m.Stats = nil
				}
			}
			if old := ms[id]; old != nil {
				m.Held = old.Held
			}
			ms[id] = &m
		case "bucket":
			b, ok := bucketOfLease(r.Name, le.Name)
			if !ok || holder == "" {
				continue
			}
			r.Holders[b] = holder
			if ms[holder] == nil {
				ms[holder] = &ringMember{Identity: holder}
			}
			ms[holder].Held |= 1 << uint(b)
		}
	}
	sort.Strings(keys)
	out := make([]ringStatus, 0, len(keys))
	for _, k := range keys {
		r := byKey[k]
		for _, m := range members[k] {
			r.Members = append(r.Members, *m)
		}
		sort.Slice(r.Members, func(i, j int) bool { return r.Members[i].Identity < r.Members[j].Identity })
		out = append(out, *r)
	}
	return out
}

// bucketOfLease returns b when name is "<ring>-bucket-NN" with NN the two
// digits of b < sharding.Buckets.
func bucketOfLease(ring, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, ring+"-bucket-")
	if !ok || len(s) != 2 {
		return 0, false
	}
	b, err := strconv.Atoi(s)
	if err != nil || b < 0 || b >= sharding.Buckets {
		return 0, false
	}
	return b, true
}

// operatorMember returns the MEMBER cell of op: "by namespace" for
// spec.sharding Namespace; otherwise the holder of the bucket of op's name
// (sharding.NameBucket), "-" when that bucket is free. With several rings
// each holder is prefixed by its ring, "namespace/ring=holder", joined by
// ",".
func operatorMember(op *opv1a1.Operator, rings []ringStatus) string {
	if op.Spec.Sharding == opv1a1.ShardByNamespace {
		return "by namespace"
	}
	b := sharding.NameBucket(op.Name)
	var cells []string
	for i := range rings {
		h := rings[i].Holders[b]
		if h == "" {
			h = "-"
		}
		if len(rings) > 1 {
			h = rings[i].key() + "=" + h
		}
		cells = append(cells, h)
	}
	return strings.Join(cells, ",")
}

// liveCell returns the LIVE cell of m at now: "yes" while its Lease's
// renewTime + leaseDurationSeconds is after now (the observer's clock, as
// in client-go's leader election), else why not.
func liveCell(m *ringMember, now time.Time) string {
	switch {
	case !m.HasLease:
		return "no (no member lease)"
	case m.Expiry.IsZero():
		return "no (never renewed)"
	case m.Expiry.After(now):
		return "yes"
	default:
		return "no (expired " + duration.HumanDuration(now.Sub(m.Expiry)) + " ago)"
	}
}

// bucketsCell writes s as its count and its ranges, e.g. "21 (0-9,30-40)";
// "0" for the empty set.
func bucketsCell(s sharding.BucketSet) string {
	if s == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", s.Count(), s)
}

// printRings writes, for each ring, a blank line, the table of its
// members at now and, when some buckets are free, a line
// "unassigned: N (ranges)". paint colours a cell (see printStatus).
func printRings(w io.Writer, rings []ringStatus, now time.Time, paint func(s, code string) string) error {
	stat := func(m *ringMember, k string) string {
		if v, ok := m.Stats[k]; ok {
			return strconv.FormatInt(v, 10)
		}
		return "-"
	}
	for i := range rings {
		r := &rings[i]
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RING\tMEMBER\tLIVE\tBUCKETS\tOPERATORS\tSYNCS\tWATCH EVENTS\tADDRESS")
		for j := range r.Members {
			m := &r.Members[j]
			live := liveCell(m, now)
			if live == "yes" {
				live = paint(live, "32")
			} else {
				live = paint(live, "31")
			}
			addr := m.Address
			if addr == "" {
				addr = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.key(), m.Identity, live, bucketsCell(m.Held),
				stat(m, "operators"), stat(m, "syncs"), stat(m, "watchEvents"), addr)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if free := r.free(); free != 0 {
			if _, err := fmt.Fprintf(w, "unassigned: %s\n", bucketsCell(free)); err != nil {
				return err
			}
		}
	}
	return nil
}
