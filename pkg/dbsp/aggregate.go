package dbsp

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
// in unspecified order. A nil document or ErrSkip means the group has no
// output.
type AggregateFunc func(key any, members []Member) (Document, error)

// GroupBy is the incremental form of grouped aggregation (DBSP's Aggregate
// over a group-by index): the snapshot output has one document,
// agg(k, members), for each key k of the input. The operator keeps each
// group's integrated members and its last output; on a delta it updates only
// the touched groups, recomputes their outputs, and emits -old +new for each
// group whose output changed. The cost of a step is proportional to the size
// of the touched groups.
type GroupBy struct {
	key    KeyFunc
	member MemberFunc
	agg    AggregateFunc
	groups valueMap[*group]
}

type group struct {
	members valueMap[*Member] // by document
	out     Document          // nil: no output
	outHash uint64            // Hash(out)
	touched bool
}

// NewGroupBy returns an incremental grouped aggregate at time zero. member
// may be nil.
func NewGroupBy(key KeyFunc, member MemberFunc, agg AggregateFunc) *GroupBy {
	return &GroupBy{key: key, member: member, agg: agg}
}

// add adds weight w of doc (with hash h) to the members of grp.
func (g *GroupBy) add(grp *group, h uint64, doc Document, w int, errs *errorList) {
	if m, ok := grp.members.get(h, doc); ok {
		m.Weight += w
		if m.Weight == 0 {
			grp.members.del(h, doc)
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
	grp.members.put(h, doc, m)
}

func (g *GroupBy) aggregate(key any, grp *group, errs *errorList) Document {
	if grp.members.len() == 0 {
		return nil
	}
	ms := make([]Member, 0, grp.members.len())
	grp.members.each(func(_ uint64, _ any, m *Member) { ms = append(ms, *m) })
	out, err := g.agg(key, ms)
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
			grp = &group{}
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
			grp = &group{}
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
