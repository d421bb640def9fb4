package object

import "testing"

// BenchmarkPatcherBookkeeping measures what a Patcher computes for one
// write besides the request: the leaves its patch owns (OwnedLeaves) and
// the patch that also removes what it set before (RemovalPatch), for the
// annotation of a pod whose record names the same annotation.
func BenchmarkPatcherBookkeeping(b *testing.B) {
	existing := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "pod-0001", "namespace": "ns", "uid": "0c6e", "resourceVersion": "12",
			"labels": map[string]any{"app": "web"}, "annotations": map[string]any{"team": "a"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x"}}}}
	patch := map[string]any{"metadata": map[string]any{"name": "pod-0001", "namespace": "ns",
		"annotations": map[string]any{"dcontroller.io/container-num": "1"}}}
	prev := map[string]any{"metadata": map[string]any{"name": true, "namespace": true,
		"annotations": map[string]any{"dcontroller.io/container-num": true}}}
	b.ReportAllocs()
	for b.Loop() {
		if len(OwnedLeaves(existing, patch, prev)) == 0 || len(RemovalPatch(prev, patch)) == 0 {
			b.Fatal("empty result")
		}
	}
}
