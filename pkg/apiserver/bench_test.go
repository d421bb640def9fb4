package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/controller"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// benchObjects is the number of view objects the benchmarks serve.
const benchObjects = 10000

func benchView(gvk schema.GroupVersionKind, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"seq": int64(0), "image": "nginx:1.27", "replicas": int64(i % 5),
			"ports": []any{map[string]any{"name": "http", "port": int64(80)}}},
	}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(fmt.Sprintf("ns-%d", i%10))
	u.SetName(fmt.Sprintf("obj-%05d", i))
	u.SetLabels(map[string]string{"app": fmt.Sprintf("app-%d", i%100)})
	return u
}

func fillStore(b *testing.B, store *view.Store, gvk schema.GroupVersionKind) {
	b.Helper()
	for i := 0; i < benchObjects; i++ {
		if _, err := store.Create(benchView(gvk, i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList10k lists 10k view objects through the API server over HTTP,
// as JSON (client-go, kubectl -o json) and as a Table (kubectl get).
func BenchmarkList10k(b *testing.B) {
	quietKlog()
	store := view.NewStore()
	fillStore(b, store, summaryGVK)
	_, base := testServer(b, store, Options{})
	url := base + "/apis/op.view.dcontroller.io/v1alpha1/summaries"
	for _, bc := range []struct{ name, accept string }{
		{"json", "application/json"},
		{"table", "application/json;as=Table;v=v1;g=meta.k8s.io"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Accept", bc.accept)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("list: %d", resp.StatusCode)
				}
				size = n
			}
			b.ReportMetric(float64(size)/1e6, "MB/list")
		})
	}
}

// watchStream reads a watch over HTTP and delivers the spec.seq of each
// event.
func watchStream(b *testing.B, url string) (<-chan int64, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b.Fatalf("watch: %d", resp.StatusCode)
	}
	ch := make(chan int64, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Object struct {
					Spec struct {
						Seq int64 `json:"seq"`
					} `json:"spec"`
				} `json:"object"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				ch <- ev.Object.Spec.Seq
			}
		}
	}()
	return ch, cancel
}

func reportDelays(b *testing.B, delays []time.Duration) {
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	pct := func(p float64) float64 {
		return float64(delays[int(p*float64(len(delays)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
}

func awaitSeq(b *testing.B, ch <-chan int64, seq int64) {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == seq {
				return
			}
		case <-timeout:
			b.Fatalf("no watch event for seq %d", seq)
		}
	}
}

// BenchmarkWatchDelayStoreWrite10k measures, with 10k objects served, the
// delay from a write into the view store (what a pipeline's target write
// is) to the event on an HTTP watch of the kind.
func BenchmarkWatchDelayStoreWrite10k(b *testing.B) {
	quietKlog()
	store := view.NewStore()
	fillStore(b, store, summaryGVK)
	_, base := testServer(b, store, Options{})
	ch, stop := watchStream(b, base+"/apis/op.view.dcontroller.io/v1alpha1/summaries?watch=true&resourceVersion="+store.ResourceVersion())
	defer stop()
	var delays []time.Duration
	seq := int64(0)
	for b.Loop() {
		seq++
		obj := benchView(summaryGVK, int(seq)%benchObjects)
		obj.Object["spec"].(map[string]any)["seq"] = seq
		start := time.Now()
		if _, err := store.Update(obj); err != nil {
			b.Fatal(err)
		}
		awaitSeq(b, ch, seq)
		delays = append(delays, time.Since(start))
	}
	reportDelays(b, delays)
}

const benchOperator = `apiVersion: dcontroller.io/v1alpha1
kind: Operator
metadata:
  name: bench
spec:
  controllers:
    - name: copy
      sources:
        - kind: Input
      pipeline:
        "@project":
          metadata:
            name: "$.metadata.name"
            namespace: "$.metadata.namespace"
          spec: "$.spec"
      target:
        kind: Output
`

// BenchmarkWatchDelayPipeline10k measures, with 10k objects in a view, the
// delay from a change of a source object, through an operator's pipeline
// (@project into another view) and its target write, to the event on an
// HTTP watch of the target view.
func BenchmarkWatchDelayPipeline10k(b *testing.B) {
	quietKlog()
	input := schema.GroupVersionKind{Group: "bench.view.dcontroller.io", Version: "v1alpha1", Kind: "Input"}
	store := view.NewStore()
	fillStore(b, store, input)
	ops, err := operator.DecodeOperators(strings.NewReader(benchOperator))
	if err != nil {
		b.Fatal(err)
	}
	rt := operator.NewRuntime(operator.RuntimeOptions{Views: store, Logger: logr.Discard()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.Upsert(ctx, ops[0])
	defer rt.Stop()
	output := schema.GroupVersionKind{Group: "bench.view.dcontroller.io", Version: "v1alpha1", Kind: "Output"}
	deadline := time.Now().Add(time.Minute)
	for len(store.List(output)) < benchObjects {
		if time.Now().After(deadline) {
			b.Fatalf("pipeline produced %d of %d outputs", len(store.List(output)), benchObjects)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, base := testServer(b, store, Options{Kinds: KindsOf(RunningOperators(rt, ops), false, controller.KindLimits{})})
	ch, stop := watchStream(b, base+"/apis/bench.view.dcontroller.io/v1alpha1/outputs?watch=true&resourceVersion="+store.ResourceVersion())
	defer stop()
	var delays []time.Duration
	seq := int64(0)
	for b.Loop() {
		seq++
		obj := benchView(input, int(seq)%benchObjects)
		obj.Object["spec"].(map[string]any)["seq"] = seq
		start := time.Now()
		if _, err := store.Update(obj); err != nil {
			b.Fatal(err)
		}
		awaitSeq(b, ch, seq)
		delays = append(delays, time.Since(start))
	}
	reportDelays(b, delays)
}
