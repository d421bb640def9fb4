package dbsp

// AggregateFunc computes the output of one group from the group's key and
// its members: the integrated, non-empty Z-set of the input documents with
// that key (weights as integrated, so possibly above 1 or, for inputs that
// are not collections, negative). A nil document or ErrSkip means the group
// has no output.
type AggregateFunc func(key any, group *ZSet) (Document, error)

// GroupBy is the incremental form of grouped aggregation (DBSP's
// Aggregate over a group-by index): the snapshot output has one document,
// agg(k, members), for each key k of the input. The operator keeps each
// group's integrated members and its last output; on a delta it updates only
// the touched groups, recomputes their outputs, and emits -old +new for each
// group whose output changed. The cost of a step is proportional to the size
// of the touched groups.
type GroupBy struct {
	key    KeyFunc
	agg    AggregateFunc
	groups valueMap[*group]
}

type group struct {
	members ZSet
	out     Document // nil: no output
	outHash uint64   // Hash(out)
	touched bool
}

// NewGroupBy returns an incremental grouped aggregate at time zero.
func NewGroupBy(key KeyFunc, agg AggregateFunc) *GroupBy {
	return &GroupBy{key: key, agg: agg}
}

func (g *GroupBy) aggregate(key any, members *ZSet, errs *errorList) Document {
	if members.IsEmpty() {
		return nil
	}
	out, err := g.agg(key, members)
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
		grp.members.insertHashed(h, doc, w)
		if !grp.touched {
			grp.touched = true
			touched = append(touched, touchedGroup{kh: kh, key: key, grp: grp})
		}
		return true
	})
	for _, t := range touched {
		grp := t.grp
		grp.touched = false
		now := g.aggregate(t.key, &grp.members, &errs)
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
		if grp.members.IsEmpty() {
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
	var groups valueMap[*ZSet]
	input.each(func(h uint64, doc Document, w int) bool {
		key, err := g.key(doc)
		if err != nil {
			errs.add(err)
			return true
		}
		kh := Hash(key)
		members, ok := groups.get(kh, key)
		if !ok {
			members = &ZSet{}
			groups.put(kh, key, members)
		}
		members.insertHashed(h, doc, w)
		return true
	})
	groups.each(func(_ uint64, key any, members *ZSet) {
		if res := g.aggregate(key, members, &errs); res != nil {
			out.Insert(res, 1)
		}
	})
	return out, errs.err()
}

// Reset implements Operator.
func (g *GroupBy) Reset() { g.groups = valueMap[*group]{} }
