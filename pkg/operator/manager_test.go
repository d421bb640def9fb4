package operator

import (
	"context"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// syncCache is a cache whose WaitForCacheSync answers from a list, one
// answer per call.
type syncCache struct {
	cache.Cache
	answers []bool
}

func (c *syncCache) WaitForCacheSync(context.Context) bool {
	a := c.answers[0]
	c.answers = c.answers[1:]
	return a
}

func TestCacheSynced(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []bool // what the cache answers, in order
		ready   []bool // what the checks report, one per answer
	}{
		{"not synced yet", []bool{false, false}, []bool{false, false}},
		{"synced", []bool{true}, []bool{true}},
		{"synced on the second check", []bool{false, true}, []bool{false, true}},
		// Once ready, an informer added later that has not synced does
		// not take the manager out of service (the cache is not asked).
		{"stays ready", []bool{true}, []bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &syncCache{answers: tc.answers}
			check := cacheSynced(c)
			for i, want := range tc.ready {
				err := check(httptest.NewRequest("GET", "/readyz", nil))
				if got := err == nil; got != want {
					t.Errorf("check %d: ready %v (%v), want %v", i, got, err, want)
				}
			}
		})
	}
}

// countingMapper answers RESTMapping from a fixed table and counts calls.
type countingMapper struct {
	meta.RESTMapper
	calls int
	known map[schema.GroupKind]string
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	res, ok := c.known[gk]
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	v := ""
	if len(versions) > 0 {
		v = versions[0]
	}
	return &meta.RESTMapping{Resource: schema.GroupVersionResource{Group: gk.Group, Version: v, Resource: res},
		GroupVersionKind: gk.WithVersion(v), Scope: meta.RESTScopeNamespace}, nil
}

func TestMemoMapper(t *testing.T) {
	pods := schema.GroupKind{Kind: "Pod"}
	widgets := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	under := &countingMapper{known: map[schema.GroupKind]string{pods: "pods"}}
	m := &memoMapper{RESTMapper: under}
	for i := 0; i < 3; i++ {
		r, err := m.RESTMapping(pods, "v1")
		if err != nil || r.Resource.Resource != "pods" || r.Resource.Version != "v1" {
			t.Fatalf("RESTMapping(Pod, v1) = %+v, %v", r, err)
		}
	}
	if under.calls != 1 {
		t.Fatalf("three lookups of one kind and version asked the mapper %d times, want 1", under.calls)
	}
	// A kind not known yet is asked again: it may have been added since.
	if _, err := m.RESTMapping(widgets, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown kind: %v, want a no-match error", err)
	}
	under.known[widgets] = "widgets"
	if r, err := m.RESTMapping(widgets, "v1"); err != nil || r.Resource.Resource != "widgets" {
		t.Fatalf("kind added later: %+v, %v", r, err)
	}
	// Another version, and lookups over several versions, are not answered
	// from the memo.
	if r, err := m.RESTMapping(pods, "v2"); err != nil || r.Resource.Version != "v2" {
		t.Fatalf("RESTMapping(Pod, v2) = %+v, %v", r, err)
	}
	before := under.calls
	_, _ = m.RESTMapping(pods)
	_, _ = m.RESTMapping(pods, "v1", "v2")
	if under.calls != before+2 {
		t.Fatalf("lookups without exactly one version asked the mapper %d times, want 2", under.calls-before)
	}
}
