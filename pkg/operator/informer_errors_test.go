package operator

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/dcontroller/dcontroller/pkg/informers"
)

// TestNewInformerRecordsListErrors runs an informer made by the manager's
// constructor over a ListerWatcher whose lists fail, and checks that the
// failure is recorded for the informer's GVK (informers.RecordErrors).
func TestNewInformerRecordsListErrors(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "manager-informer.test", Version: "v2", Kind: "Widget"}
	listErr := errors.New("conversion webhook failed")
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, listErr
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return nil, listErr
		},
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	informer := (&unstructuredWatches{}).newInformer(lw, obj, 0, toolscache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)

	timeout := errors.New("timeout")
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Before the informer records its error, SyncError probes with a
		// list of its own, which fails the same way.
		got := informers.SyncError(gvk, timeout)
		if errors.Is(got, listErr) && errors.Is(got, timeout) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no list error recorded: %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
