package dbsp

import (
	"fmt"
	"testing"
)

// benchDoc is a pod-like document of about 1KB of JSON.
func benchDoc(i int) Document {
	containers := make([]any, 2)
	for c := range containers {
		containers[c] = map[string]any{
			"name": fmt.Sprintf("c%d", c), "image": "registry.example.com/team/app:v1.2.3",
			"ports":     []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}},
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}},
			"env":       []any{map[string]any{"name": "A", "value": "b"}},
		}
	}
	return Document{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": fmt.Sprintf("pod-%d", i), "namespace": "default", "uid": fmt.Sprintf("uid-%d", i),
			"resourceVersion": "12345", "labels": map[string]any{"app": "web", "tier": "fe"},
			"annotations": map[string]any{"a": "b"},
		},
		"spec":   map[string]any{"containers": containers, "nodeName": "node-1", "restartPolicy": "Always"},
		"status": map[string]any{"phase": "Running", "podIP": "10.0.0.1", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}
}

func BenchmarkHash(b *testing.B) {
	d := benchDoc(1)
	b.ReportAllocs()
	for b.Loop() {
		Hash(d)
	}
}

func BenchmarkEqual(b *testing.B) {
	d1, d2 := benchDoc(1), benchDoc(1)
	b.ReportAllocs()
	for b.Loop() {
		if !Equal(d1, d2) {
			b.Fatal("not equal")
		}
	}
}

// BenchmarkZSetUpdate is one update (-old +new) applied to a Z-set of 10k
// documents.
func BenchmarkZSetUpdate(b *testing.B) {
	z := NewZSet()
	for i := 0; i < 10_000; i++ {
		z.Insert(benchDoc(i), 1)
	}
	old, upd := benchDoc(7), benchDoc(10_007)
	b.ReportAllocs()
	for b.Loop() {
		z.Insert(old, -1)
		z.Insert(upd, 1)
		old, upd = upd, old
	}
}
