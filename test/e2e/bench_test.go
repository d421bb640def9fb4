package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcontroller/dcontroller/pkg/operator"
)

const benchPods = 2000

func createPods(b *testing.B, ns string, n int) {
	b.Helper()
	ctx := context.Background()
	if err := k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", i), Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
			if err := k8sClient.Create(ctx, p); err != nil {
				b.Error(err)
			}
		}(i)
	}
	wg.Wait()
}

func countAnnotated(b *testing.B, ns string) int {
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Annotations["dcontroller.io/container-num"] == "1" {
			n++
		}
	}
	return n
}

// BenchmarkAnnotatePods annotates 2,000 pods with the getting-started
// operator and compares the wall time with a plain client-go loop sending
// the same 2,000 merge patches. Reported: plain-loop and operator pods/s,
// their ratio (operator rate / plain rate; target >= 0.7) and the manager's
// heap per cached pod. Run with -benchtime=1x.
func BenchmarkAnnotatePods(b *testing.B) {
	op, err := os.ReadFile(filepath.Join(repoRoot, "examples", "pod-container-num-annotator", "operator.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		plainNS, opNS := fmt.Sprintf("bench-plain-%d", i), fmt.Sprintf("bench-op-%d", i)
		createPods(b, plainNS, benchPods)
		createPods(b, opNS, benchPods)

		// The plain loop: one merge patch per pod, sequentially.
		patch := []byte(`{"metadata":{"annotations":{"dcontroller.io/container-num":"1"}}}`)
		start := time.Now()
		for j := 0; j < benchPods; j++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%04d", j), Namespace: plainNS}}
			if err := k8sClient.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
				b.Fatal(err)
			}
		}
		plain := time.Since(start)
		// Only the operator's pods stay, so the cache holds what it serves.
		if err := k8sClient.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(plainNS)); err != nil {
			b.Fatal(err)
		}

		// The operator, restricted to opNS, started on a manager with a
		// fresh cache; timed from the operator's creation to the last annotation.
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		stop := startManagerB(b)
		spec := strings.Replace(string(op), "namespace: default", "namespace: "+opNS, 1)
		spec = strings.Replace(spec, "name: pod-container-num-annotator\nspec", "name: bench-annotator\nspec", 1)
		start = time.Now()
		if _, err := kubectlB(spec, "apply", "-f", "-"); err != nil {
			b.Fatal(err)
		}
		for countAnnotated(b, opNS) < benchPods {
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("only %d of %d pods annotated after 5m", countAnnotated(b, opNS), benchPods)
			}
			time.Sleep(50 * time.Millisecond)
		}
		withOp := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(benchPods)/plain.Seconds(), "plain-pods/s")
		b.ReportMetric(float64(benchPods)/withOp.Seconds(), "operator-pods/s")
		b.ReportMetric(plain.Seconds()/withOp.Seconds(), "rate-ratio")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(benchPods), "heap-B/cached-pod")
		if _, err := kubectlB("", "delete", "operators.dcontroller.io", "bench-annotator"); err != nil {
			b.Fatal(err)
		}
		stop()
		for _, ns := range []string{plainNS, opNS} {
			_ = k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	}
}

// startManagerB is startManager for benchmarks.
func startManagerB(b *testing.B) func() {
	b.Helper()
	mgr, rt, err := operator.NewManager(restConfig, operator.ManagerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &operator.Reconciler{Client: mgr.GetClient(), Runtime: rt}
	if err := rec.SetupWithManager(ctx, mgr); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
		rt.Stop()
	}()
	return func() { cancel(); <-done }
}
