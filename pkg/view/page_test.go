package view

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dcontroller/dcontroller/pkg/object"
)

// TestSelectPageSnapshots: after random creates, updates (of labels and
// spec) and deletes across two namespaces and another kind, paging through
// any version the history still reaches, with any limit and selector,
// yields exactly the selection Select returned at that version.
func TestSelectPageSnapshots(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := NewStore()
	other := podGVK
	other.Kind = "Other"
	type snap struct {
		rv  int64
		all []*unstructured.Unstructured
	}
	var snaps []snap
	take := func() {
		all, rv := s.Select(podGVK, ListOptions{})
		n, _ := strconv.ParseInt(rv, 10, 64)
		snaps = append(snaps, snap{n, all})
	}
	for i := 0; i < 400; i++ {
		ns := []string{"a", "a-b", "b"}[r.IntN(3)]
		name := fmt.Sprintf("p%d", r.IntN(25))
		obj := pod(name, map[string]any{"n": int64(i)})
		obj.SetNamespace(ns)
		obj.SetLabels(map[string]string{"color": []string{"red", "blue"}[r.IntN(2)]})
		if r.IntN(10) == 0 {
			obj.SetGroupVersionKind(other)
		}
		_, err := s.Get(obj.GroupVersionKind(), object.Key{Namespace: ns, Name: name})
		switch {
		case err != nil:
			mustCreate(t, s, obj)
		case r.IntN(3) == 0:
			if err := s.Delete(obj.GroupVersionKind(), object.Key{Namespace: ns, Name: name}); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := s.Update(obj); err != nil {
				t.Fatal(err)
			}
		}
		if r.IntN(4) == 0 {
			take()
		}
	}
	take()
	red, _ := labels.Parse("color=red")
	for _, sn := range snaps {
		for _, sel := range []ListOptions{{}, {Namespace: "a"}, {Labels: red}} {
			var want []string
			for _, o := range sn.all {
				if sel.Matches(o) {
					want = append(want, o.GetNamespace()+"/"+o.GetName()+"@"+o.GetResourceVersion())
				}
			}
			limit := int64(1 + r.IntN(6))
			var got []string
			opts := PageOptions{ListOptions: sel, ResourceVersion: sn.rv, Limit: limit}
			for pages := 0; ; pages++ {
				p, err := s.SelectPage(podGVK, opts)
				if err != nil {
					t.Fatalf("rv %d: %v", sn.rv, err)
				}
				if p.ResourceVersion != sn.rv || int64(len(p.Items)) > limit {
					t.Fatalf("rv %d: page at %d with %d items (limit %d)", sn.rv, p.ResourceVersion, len(p.Items), limit)
				}
				for _, o := range p.Items {
					got = append(got, o.GetNamespace()+"/"+o.GetName()+"@"+o.GetResourceVersion())
				}
				if want := int64(len(want) - len(got)); p.Remaining != want {
					t.Fatalf("rv %d: remaining %d, want %d", sn.rv, p.Remaining, want)
				}
				if !p.More {
					break
				}
				last := p.Items[len(p.Items)-1]
				opts.Start = &object.Key{Namespace: last.GetNamespace(), Name: last.GetName() + "\x00"}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("rv %d %+v limit %d:\n got %v\nwant %v", sn.rv, sel, limit, got, want)
			}
		}
	}
}

// TestSelectPageExpired: a version whose later changes the history dropped,
// or one newer than the store, is ErrSnapshotExpired; the current state
// still pages.
func TestSelectPageExpired(t *testing.T) {
	s := NewStoreWithOptions(Options{HistoryLimit: 3})
	for i := 0; i < 3; i++ {
		mustCreate(t, s, pod(fmt.Sprintf("p%d", i), nil))
	}
	if _, err := s.SelectPage(podGVK, PageOptions{ResourceVersion: 1, Limit: 1}); err != nil {
		t.Fatalf("version 1 with 3 changes kept: %v", err)
	}
	mustCreate(t, s, pod("p3", nil))
	mustCreate(t, s, pod("p4", nil))
	for _, rv := range []int64{1, 99} {
		if _, err := s.SelectPage(podGVK, PageOptions{ResourceVersion: rv, Limit: 1}); !errors.Is(err, ErrSnapshotExpired) {
			t.Errorf("version %d: %v, want ErrSnapshotExpired", rv, err)
		}
	}
	p, err := s.SelectPage(podGVK, PageOptions{Limit: 2})
	if err != nil || len(p.Items) != 2 || p.Remaining != 3 || p.ResourceVersion != 5 {
		t.Errorf("current page: %+v %v", p, err)
	}
}

// BenchmarkSelectPages: one chunked list of 100,000 objects in pages of
// 500 (kubectl's chunk size), at the current state and at a version 10,000
// changes old.
func BenchmarkSelectPages(b *testing.B) {
	const n, limit = 100_000, 500
	s := NewStore()
	for i := 0; i < n; i++ {
		obj := pod(fmt.Sprintf("p%06d", i), map[string]any{"n": int64(i)})
		if _, err := s.Create(obj); err != nil {
			b.Fatal(err)
		}
	}
	at, _ := strconv.ParseInt(s.ResourceVersion(), 10, 64)
	for i := 0; i < 10_000; i++ {
		if _, err := s.Update(pod(fmt.Sprintf("p%06d", i*7), map[string]any{"n": int64(-1)})); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		rv   int64
	}{{"current", 0}, {"old", at}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				opts, total := PageOptions{ResourceVersion: c.rv, Limit: limit}, 0
				for {
					p, err := s.SelectPage(podGVK, opts)
					if err != nil {
						b.Fatal(err)
					}
					total += len(p.Items)
					if !p.More {
						break
					}
					last := p.Items[len(p.Items)-1]
					opts.ResourceVersion = p.ResourceVersion
					opts.Start = &object.Key{Namespace: last.GetNamespace(), Name: last.GetName() + "\x00"}
				}
				if total != n {
					b.Fatalf("listed %d, want %d", total, n)
				}
			}
		})
	}
}
