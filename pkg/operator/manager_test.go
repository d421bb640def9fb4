package operator

import (
	"context"
	"net/http/httptest"
	"testing"

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
