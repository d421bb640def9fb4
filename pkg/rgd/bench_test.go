package rgd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/internal/cputime"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/operator"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// BenchmarkRGDChange measures what one instance change costs a compiled
// RGD: the webapp RGD of testdata/compile (a Deployment with readyWhen, a
// Service that reads it, a status from both) runs offline over N
// instances (100 and 1,000), each with its Deployment ready and its
// Service; then one instance's spec.port changes, which changes its
// Deployment, its Service and its status. Each op is that change through
// the store, the controller, the pipeline and the three writes. Run with
//
//	go test ./pkg/rgd -run '^$' -bench RGDChange -benchtime=300x
//
// Besides ns/op (wall time) and allocs/op it reports cpu-ns/op, the
// process CPU time per change (internal/cputime: on a shared machine wall
// time mixes in the other tenants' load), docs/op, the Z-set entries the
// pipeline's stages output for the change (OfflineOptions.Trace), and
// writes/op, the objects written to the store (the instance's change
// included). The work of one change must not grow with N: docs/op and
// writes/op are the same for 100 and 1,000 instances.
func BenchmarkRGDChange(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "compile", "webapp-status.rgd.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	c, err := Compile(decodeRGDTB(b, string(src)))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{100, 1_000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			benchRGDChange(b, c.Operator, n)
		})
	}
}

func benchRGDChange(b *testing.B, op *opv1a1.Operator, n int) {
	ctx := context.Background()
	instGVK := schema.GroupVersionKind{Group: "kro.run", Version: "v1alpha1", Kind: "WebApp"}
	var docs int
	off, err := operator.NewOffline([]*opv1a1.Operator{op}, operator.OfflineOptions{
		Trace:             func(_, _, _ string, delta *dbsp.ZSet) { docs += delta.Len() },
		StatusSubresource: operator.InputStatusSubresource(nil)})
	if err != nil {
		b.Fatal(err)
	}
	if err := off.Start(ctx); err != nil {
		b.Fatal(err)
	}
	instances := make([]*unstructured.Unstructured, n)
	for i := range instances {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec": map[string]any{"name": fmt.Sprintf("app%d", i), "image": "nginx", "port": int64(8080), "replicas": int64(2)},
		}}
		u.SetGroupVersionKind(instGVK)
		u.SetNamespace(fmt.Sprintf("ns%d", i%10))
		u.SetName(fmt.Sprintf("app%d", i))
		u.SetUID(types.UID(fmt.Sprintf("uid-%d", i)))
		instances[i] = u
	}
	if err := off.ApplyAll(ctx, instances); err != nil {
		b.Fatal(err)
	}
	// The Deployments become available, as kube-controller-manager
	// reports it: the Services follow.
	for _, d := range off.Store.List(deploymentGVK) {
		d = d.DeepCopy()
		d.Object["status"] = map[string]any{"availableReplicas": int64(2)}
		if _, err := off.Store.Update(d); err != nil {
			b.Fatal(err)
		}
	}
	if err := off.ApplyAll(ctx, nil); err != nil {
		b.Fatal(err)
	}
	if got := len(off.Store.List(schema.GroupVersionKind{Version: "v1", Kind: "Service"})); got != n {
		b.Fatalf("%d Services, want %d", got, n)
	}
	var writes int
	unsubscribe := off.Store.Subscribe(func(view.Event) { writes++ })
	defer unsubscribe()
	docs = 0
	runtime.GC() // the loading garbage is not the changes' cost
	start, _ := cputime.Process()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		inst := instances[(i*7919)%n]
		key := object.Key{Namespace: inst.GetNamespace(), Name: inst.GetName()}
		u, err := off.Store.Get(instGVK, key)
		if err != nil {
			b.Fatal(err)
		}
		u = u.DeepCopy()
		port, _, _ := unstructured.NestedInt64(u.Object, "spec", "port")
		_ = unstructured.SetNestedField(u.Object, 8080+(port-8079)%2, "spec", "port")
		if _, err := off.Store.Update(u); err != nil {
			b.Fatal(err)
		}
		if err := off.ApplyAll(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if end, ok := cputime.Process(); ok {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(docs)/float64(b.N), "docs/op")
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
	// The last change reached its resources and its status.
	inst := instances[((b.N-1)*7919)%n]
	u, err := off.Store.Get(instGVK, object.Key{Namespace: inst.GetNamespace(), Name: inst.GetName()})
	if err != nil {
		b.Fatal(err)
	}
	port, _, _ := unstructured.NestedInt64(u.Object, "spec", "port")
	endpoint, _, _ := unstructured.NestedString(u.Object, "status", "endpoint")
	if want := fmt.Sprintf("http://%s-svc.%s.svc:%d", inst.GetName(), inst.GetNamespace(), port); endpoint != want {
		b.Fatalf("status.endpoint %q, want %q", endpoint, want)
	}
}
