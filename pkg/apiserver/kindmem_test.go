package apiserver

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/view"
)

// manyKinds returns n view kinds of one operator.
func manyKinds(n int) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, n)
	for i := range out {
		out[i] = schema.GroupVersionKind{Group: "mem.view.dcontroller.io", Version: "v1alpha1", Kind: fmt.Sprintf("View%04d", i)}
	}
	return out
}

// heapPerKind serves n view kinds of one operator and returns the live
// heap they add, per kind, in bytes: from the server with no kinds to the
// server with n kinds after their OpenAPI documents were fetched once in
// JSON (as kubectl does).
func heapPerKind(t testing.TB, n int) uint64 {
	var mu sync.Mutex
	var kinds []schema.GroupVersionKind
	store := view.NewStore()
	s, base := testServer(t, store, Options{Kinds: func() []schema.GroupVersionKind {
		mu.Lock()
		defer mu.Unlock()
		return kinds
	}})
	before := steadyHeap(64 << 10)
	mu.Lock()
	kinds = manyKinds(n)
	mu.Unlock()
	s.Sync()
	if code, _ := get(t, base+"/openapi/v2", "application/json"); code != 200 {
		t.Fatalf("/openapi/v2: %d", code)
	}
	if code, _ := get(t, base+"/openapi/v3/apis/mem.view.dcontroller.io/v1alpha1", "application/json"); code != 200 {
		t.Fatalf("/openapi/v3: %d", code)
	}
	after := steadyHeap(64 << 10)
	if path := os.Getenv("DCTL_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if after < before {
		return 0
	}
	return (after - before) / uint64(n)
}

// maxHeapPerViewKind bounds the live heap one served view kind adds, with
// its OpenAPI documents fetched. The documents of all kinds share what is
// not the kind's own (about 85 KB per kind, of which some 30 KB are the
// two documents' JSON); when each kind built its own copy of every
// parameter and response it was about 190 KB.
const maxHeapPerViewKind = 140 << 10

// TestHeapPerViewKind measures the live heap 500 view kinds of one
// operator add to the server (with DCTL_HEAP_PROFILE=<file>, it writes a
// heap profile of the server serving them for `go tool pprof
// -sample_index=inuse_space`). The bound is generous: it catches a
// per-kind copy of the documents' shared parts, not noise.
func TestHeapPerViewKind(t *testing.T) {
	quietKlog()
	per := heapPerKind(t, 500)
	t.Logf("heap per view kind: %d bytes", per)
	if per > maxHeapPerViewKind {
		t.Errorf("a view kind adds %d bytes of heap, over %d", per, maxHeapPerViewKind)
	}
}

// TestDroppedKindsLeaveNothing: view kinds that are no longer served (their
// operator deleted) leave no trace in the server: not in the registry of
// equivalent resources, and not in the live heap (within 512 bytes per
// kind, the maps that held them keeping their size, where the registry of
// k8s.io/apimachinery kept about 1.2 KB more).
func TestDroppedKindsLeaveNothing(t *testing.T) {
	quietKlog()
	const n = 1000
	var mu sync.Mutex
	var kinds []schema.GroupVersionKind
	store := view.NewStore()
	s, base := testServer(t, store, Options{Kinds: func() []schema.GroupVersionKind {
		mu.Lock()
		defer mu.Unlock()
		return kinds
	}})
	setKinds := func(k []schema.GroupVersionKind) {
		mu.Lock()
		kinds = k
		mu.Unlock()
		s.Sync()
		if code, _ := get(t, base+"/openapi/v2", "application/json"); code != 200 {
			t.Fatalf("/openapi/v2: %d", code)
		}
	}
	// A first round, so that what the server allocates once is there
	// before the baseline.
	setKinds(manyKinds(1))
	setKinds(nil)
	before := steadyHeap(64 << 10)
	all := manyKinds(n)
	setKinds(all)
	gvr := all[0].GroupVersion().WithResource(ResourceName(all[0].Kind))
	if got := s.equivalent.KindFor(gvr, ""); got != all[0] {
		t.Fatalf("kind for %s while served: %v", gvr, got)
	}
	setKinds(nil)
	if got := s.equivalent.KindFor(gvr, ""); !got.Empty() {
		t.Errorf("kind for %s once dropped: %v", gvr, got)
	}
	after := steadyHeap(64 << 10)
	t.Logf("heap after %d kinds came and went: %d bytes more", n, int64(after)-int64(before))
	if after > before+n*512 {
		t.Errorf("%d dropped kinds left %d bytes of heap, over %d", n, after-before, n*512)
	}
}
