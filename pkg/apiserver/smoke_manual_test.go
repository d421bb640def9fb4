package apiserver

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/view"
)

func TestSmokeManual(t *testing.T) {
	if os.Getenv("SMOKE") == "" {
		t.Skip()
	}
	st := view.NewStore()
	st.SetOptions(view.Options{ServerMetadata: true})
	for _, n := range []string{"a", "b"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "myop.view.dcontroller.io/v1alpha1", "kind": "Summary",
			"metadata": map[string]any{"name": n, "namespace": "default", "labels": map[string]any{"app": n}}, "spec": map[string]any{"x": int64(1)}}}
		if _, err := st.Create(u); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Addr: "127.0.0.1:18443", Store: st, ServeNativeKinds: os.Getenv("NATIVE") != "",
		Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{{Version: "v1", Kind: "Pod"}} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	go func() {
		<-ctx.Done()
	}()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
