package dbsp

import (
	"slices"
	"strings"
)

// Member is one member of a group of GroupBy: an input document, its
// integrated weight (possibly above 1, or negative for inputs that are not
// collections) and the value the GroupBy's MemberFunc computed for it when it
// joined the group (nil without a MemberFunc).
type Member struct {
	Doc    Document
	Weight int
	Value  any
}

// MemberFunc precomputes, once per document as it joins a group, what the
// AggregateFunc needs of it (e.g. its sort key and the field it
// aggregates), so that recomputing a group does not walk every member
// document again. Returning ErrSkip drops the document.
type MemberFunc func(Document) (any, error)

// AggregateFunc computes the output of one group from the group's key and
// its members: the non-empty integral of the input documents with that key,
// in the GroupBy's member order (see OrderBy). The slice is reused by the
// next call and must not be kept; the members' documents and values must
// not be modified. A nil document or ErrSkip means the group has no output.
type AggregateFunc func(key any, members []Member) (Document, error)

// MemberKey returns the sort key of a member from the value its MemberFunc
// computed, once as the member joins its group (see OrderBy).
type MemberKey func(value any) string

// GroupBy is the incremental form of grouped aggregation (DBSP's Aggregate
// over a group-by index): the snapshot output has one document,
// agg(k, members), for each key k of the input. The operator keeps each
// group's integrated members, sorted, and its last output; on a delta it
// updates only the touched groups, recomputes their outputs, and emits
// -old +new for each group whose output changed.
//
// Cost: a delta of d documents touching groups of sizes G1..Gk costs
// O(d log d) to sort the new members plus O(G1 + ... + Gk) to merge them
// into the groups' sorted members and to compute the aggregates, the size
// of the groups' new outputs. Loading N documents into one group in one
// delta costs O(N log N); one change in a group of G members costs O(G),
// with no sort.
type GroupBy struct {
	key     KeyFunc
	member  MemberFunc
	order   MemberKey
	agg     AggregateFunc
	groups  valueMap[*group]
	scratch []Member // the members handed to agg, reused
}

// group is the state of one group: its members by document (to find a
// member from a delta) and in order (for the aggregate), and its last
// output.
type group struct {
	members valueMap[sorted] // by document
	sorted  []sorted         // by compareSorted; members of weight 0 until flush
	out     Document         // nil: no output
	outHash uint64           // Hash(out)
	touched bool
	// pending are the members the current delta added, not yet in sorted;
	// removed counts the members of sorted whose weight fell to 0.
	pending []sorted
	removed int
}

// sorted is a member with its sort key: the key is inline so that
// comparisons follow no pointer but the key's bytes.
type sorted struct {
	key string
	m   *Member
}

// fewPending is the number of new members up to which flush inserts each
// one by binary search (a move of the slice's tail) rather than sorting
// them and merging the two sorted lists.
const fewPending = 16

// NewGroupBy returns an incremental grouped aggregate at time zero. member
// may be nil. Members are handed to agg in the canonical order of their
// documents (Compare) unless OrderBy sets another.
func NewGroupBy(key KeyFunc, member MemberFunc, agg AggregateFunc) *GroupBy {
	return &GroupBy{key: key, member: member, agg: agg}
}

// OrderBy makes g keep each group's members ordered by the bytes of their
// keys, then by the canonical order of their documents, and hand them to
// the AggregateFunc in that order; an AggregateFunc that needs its members
// sorted thus needs no sort of its own. The key is computed from the
// member's value; call OrderBy before the first Step. It returns g.
func (g *GroupBy) OrderBy(key MemberKey) *GroupBy {
	g.order = key
	return g
}

func compareSorted(a, b sorted) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return Compare(a.m.Doc, b.m.Doc)
}

func newGroup() *group { return &group{} }

// add adds weight w of doc (with hash h) to the members of grp.
func (g *GroupBy) add(grp *group, h uint64, doc Document, w int, errs *errorList) {
	if s, ok := grp.members.get(h, doc); ok {
		s.m.Weight += w
		if s.m.Weight == 0 {
			grp.members.del(h, doc)
			grp.removed++
		}
		return
	}
	m := &Member{Doc: doc, Weight: w}
	if g.member != nil {
		v, err := g.member(doc)
		if err != nil {
			errs.add(err)
			return
		}
		m.Value = v
	}
	s := sorted{m: m}
	if g.order != nil {
		s.key = g.order(m.Value)
	}
	grp.members.put(h, doc, s)
	grp.pending = append(grp.pending, s)
}

// flush brings the sorted members of grp up to date: it drops the members
// of weight 0 and merges the pending ones in. O(G + k log k) for k pending
// members in a group of G.
func flush(grp *group) {
	gone := func(s sorted) bool { return s.m.Weight == 0 }
	if grp.removed > 0 {
		grp.sorted = slices.DeleteFunc(grp.sorted, gone)
		grp.removed = 0
	}
	pending := slices.DeleteFunc(grp.pending, gone)
	if len(pending) <= fewPending {
		for _, s := range pending {
			i, _ := slices.BinarySearchFunc(grp.sorted, s, compareSorted)
			grp.sorted = slices.Insert(grp.sorted, i, s)
		}
	} else {
		slices.SortFunc(pending, compareSorted)
		a := grp.sorted
		merged := make([]sorted, 0, len(a)+len(pending))
		for len(a) > 0 && len(pending) > 0 {
			if compareSorted(pending[0], a[0]) < 0 {
				merged, pending = append(merged, pending[0]), pending[1:]
			} else {
				merged, a = append(merged, a[0]), a[1:]
			}
		}
		merged = append(append(merged, a...), pending...)
		grp.sorted = merged
	}
	clear(grp.pending)
	grp.pending = grp.pending[:0]
}

func (g *GroupBy) aggregate(key any, grp *group, errs *errorList) Document {
	flush(grp)
	if grp.members.len() == 0 {
		return nil
	}
	ms := g.scratch[:0]
	for _, s := range grp.sorted {
		ms = append(ms, *s.m)
	}
	out, err := g.agg(key, ms)
	clear(ms) // do not keep the documents alive
	g.scratch = ms[:0]
	if err != nil {
		errs.add(err)
		return nil
	}
	return out
}

// Step implements Operator.
func (g *GroupBy) Step(delta *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	type touchedGroup struct {
		kh  uint64
		key any
		grp *group
	}
	var touched []touchedGroup
	delta.each(func(h uint64, doc Document, w int) bool {
		key, err := g.key(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		kh := Hash(key)
		grp, ok := g.groups.get(kh, key)
		if !ok {
			grp = newGroup()
			g.groups.put(kh, key, grp)
		}
		g.add(grp, h, doc, w, &errs)
		if !grp.touched {
			grp.touched = true
			touched = append(touched, touchedGroup{kh: kh, key: key, grp: grp})
		}
		return true
	})
	for _, t := range touched {
		grp := t.grp
		grp.touched = false
		now := g.aggregate(t.key, grp, &errs)
		var nowHash uint64
		if now != nil {
			nowHash = Hash(now)
			if grp.out != nil && nowHash == grp.outHash && Equal(grp.out, now) {
				continue
			}
			out.insertHashed(nowHash, now, 1)
		}
		if grp.out != nil {
			out.insertHashed(grp.outHash, grp.out, -1)
		}
		grp.out, grp.outHash = now, nowHash
		if grp.members.len() == 0 {
			g.groups.del(t.kh, t.key)
		}
	}
	return out, errs.err()
}

// Snapshot implements Operator: it groups the whole input and aggregates
// every group.
func (g *GroupBy) Snapshot(input *ZSet) (*ZSet, error) {
	out := &ZSet{}
	var errs errorList
	var groups valueMap[*group]
	input.each(func(h uint64, doc Document, w int) bool {
		key, err := g.key(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		kh := Hash(key)
		grp, ok := groups.get(kh, key)
		if !ok {
			grp = newGroup()
			groups.put(kh, key, grp)
		}
		g.add(grp, h, doc, w, &errs)
		return true
	})
	groups.each(func(_ uint64, key any, grp *group) {
		if res := g.aggregate(key, grp, &errs); res != nil {
			out.Insert(res, 1)
		}
	})
	return out, errs.err()
}

// Reset implements Operator.
func (g *GroupBy) Reset() { g.groups = valueMap[*group]{} }
