package controller

import "github.com/dcontroller/dcontroller/pkg/dbsp"

// outputSet is the integrated pipeline output of one target key, a Z-set
// that almost always holds a single document: that one is kept inline,
// without the hash map of a dbsp.ZSet, which would cost more memory than
// the document itself.
type outputSet struct {
	one  dbsp.Entry // the single element while more is nil; zero when empty
	more *dbsp.ZSet // the elements while there are two or more
}

// insert adds weight to the weight of doc (a non-nil document), as
// dbsp.ZSet's Insert does.
func (o *outputSet) insert(doc dbsp.Document, weight int) {
	switch {
	case weight == 0:
	case o.more != nil:
		o.more.Insert(doc, weight)
		if o.more.Len() == 1 {
			o.one, o.more = o.more.Entries()[0], nil
		}
	case o.one.Doc == nil:
		o.one = dbsp.Entry{Doc: doc, Weight: weight}
	case dbsp.Equal(o.one.Doc, doc):
		o.one.Weight += weight
		if o.one.Weight == 0 {
			o.one = dbsp.Entry{}
		}
	default:
		o.more = dbsp.NewZSet()
		o.more.Insert(o.one.Doc, o.one.Weight)
		o.more.Insert(doc, weight)
		o.one = dbsp.Entry{}
	}
}

// empty reports whether the set has no elements.
func (o *outputSet) empty() bool { return o.more == nil && o.one.Doc == nil }

// entries returns the elements in the canonical order of dbsp.ZSet's
// Entries.
func (o *outputSet) entries() []dbsp.Entry {
	switch {
	case o.more != nil:
		return o.more.Entries()
	case o.one.Doc == nil:
		return nil
	}
	return []dbsp.Entry{o.one}
}
