package dbsp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// memberName is a MemberKey: the member value of memberDoc is the document.
func memberName(v any) string { name, _ := v.(Document)["name"].(string); return name }

func memberDoc(d Document) (any, error) { return d, nil }

// orderedNames aggregates a group into its members' names and weights in
// the order they come, and fails when that is not the order of OrderBy
// (name, then Compare).
func orderedNames(key any, members []Member) (Document, error) {
	var names []any
	for i, m := range members {
		if i > 0 {
			prev := members[i-1]
			if c := strings.Compare(memberName(prev.Value), memberName(m.Value)); c > 0 || (c == 0 && Compare(prev.Doc, m.Doc) >= 0) {
				return nil, errors.New("members out of order")
			}
		}
		if m.Weight > 0 {
			names = append(names, fmt.Sprintf("%s*%d/%v", m.Doc["name"], m.Weight, m.Doc["v"]))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	return Document{"key": key, "names": names}, nil
}

func TestGroupByOrderedProperty(t *testing.T) {
	checkUnary(t, func() Operator { return NewGroupBy(keyK, memberDoc, orderedNames).OrderBy(memberName) }, false)
	checkUnary(t, func() Operator { return NewGroupBy(keyK, memberDoc, orderedNames).OrderBy(memberName) }, true)
}

// TestGroupByLargeGroup: a group of thousands of members, loaded in one
// delta and then changed a few members at a time, has the output of an
// independent reference (sort the live members) after every step.
func TestGroupByLargeGroup(t *testing.T) {
	const size, churnSteps = 3000, 100
	r := rand.New(rand.NewPCG(7, 9))
	gen := func() Document {
		return Document{"name": fmt.Sprintf("m%05d", r.IntN(2*size)), "k": "g", "v": int64(r.IntN(3))}
	}
	reference := func(live *ZSet) *ZSet {
		type e struct {
			doc Document
			w   int
		}
		var ms []e
		live.Range(func(d Document, w int) bool { ms = append(ms, e{d, w}); return true })
		slices.SortFunc(ms, func(a, b e) int {
			if c := strings.Compare(a.doc["name"].(string), b.doc["name"].(string)); c != 0 {
				return c
			}
			return Compare(a.doc, b.doc)
		})
		var names []any
		for _, m := range ms {
			if m.w > 0 {
				names = append(names, fmt.Sprintf("%s*%d/%v", m.doc["name"], m.w, m.doc["v"]))
			}
		}
		out := NewZSet()
		if len(names) > 0 {
			out.Insert(Document{"key": "g", "names": names}, 1)
		}
		return out
	}

	op := NewGroupBy(keyK, memberDoc, orderedNames).OrderBy(memberName)
	live, out := NewZSet(), NewIntegrate()
	load := NewZSet()
	for range size {
		load.Insert(gen(), 1)
	}
	for step := 0; step <= churnSteps; step++ {
		delta := load
		if step > 0 {
			delta = NewZSet()
			for n := 1 + r.IntN(20); n > 0; n-- {
				var old Entry
				i := r.IntN(live.Len())
				live.Range(func(d Document, w int) bool { old = Entry{d, w}; i--; return i >= 0 })
				switch r.IntN(3) {
				case 0: // insert
					delta.Insert(gen(), 1)
				case 1: // update: same name, another version
					if delta.Weight(old.Doc) == 0 {
						delta.Insert(old.Doc, -1)
						nd := gen()
						nd["name"] = old.Doc["name"]
						delta.Insert(nd, 1)
					}
				default: // delete
					if delta.Weight(old.Doc) == 0 {
						delta.Insert(old.Doc, -1)
					}
				}
			}
		}
		live.Add(delta)
		d, err := op.Step(delta)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		got := out.Step(d)
		mustEqual(t, step, "I(Step) vs reference", got, reference(live))
		if step%25 == 0 {
			snap, err := NewGroupBy(keyK, memberDoc, orderedNames).OrderBy(memberName).Snapshot(live)
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, step, "I(Step) vs Snapshot(I)", got, snap)
		}
	}
}
