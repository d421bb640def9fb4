package metacontroller

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

func TestNewHooksNeedsSyncOrFinalize(t *testing.T) {
	h := &mcv1a1.Hook{Webhook: &mcv1a1.Webhook{URL: ptr.To("http://hook.example/x")}}
	for _, tc := range []struct {
		name              string
		sync, fin, cust   *mcv1a1.Hook
		wantErr, wantSync bool
	}{
		{name: "sync only", sync: h, wantSync: true},
		{name: "finalize only", fin: h},
		{name: "sync and finalize", sync: h, fin: h, wantSync: true},
		{name: "customize only", cust: h, wantErr: true},
		{name: "none", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs, _, err := newHooks(deps{}, "decoratorcontroller/x", tc.sync, tc.fin, tc.cust, nil)
			if tc.wantErr {
				if err == nil || err.Error() != "spec.hooks: a sync or a finalize hook is required" {
					t.Fatalf("error %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (hs.syncHook != nil) != tc.wantSync || (hs.finHook != nil) != (tc.fin != nil) {
				t.Errorf("sync %v finalize %v", hs.syncHook, hs.finHook)
			}
		})
	}
}

func TestCleanupTimeoutOf(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want time.Duration
		err  string
	}{
		{want: DefaultCleanupTimeout},
		{ann: map[string]string{CleanupTimeoutAnnotation: "30s"}, want: 30 * time.Second},
		{ann: map[string]string{CleanupTimeoutAnnotation: "0"}, want: 0},
		{ann: map[string]string{CleanupTimeoutAnnotation: "soon"}, want: DefaultCleanupTimeout, err: `metadata.annotations["dcontroller.io/cleanup-timeout"]: "soon" is not a duration`},
		{ann: map[string]string{CleanupTimeoutAnnotation: "-1s"}, want: DefaultCleanupTimeout, err: `"-1s" is not a duration of 0 or more`},
	} {
		o := &metav1.ObjectMeta{Annotations: tc.ann}
		got, err := cleanupTimeoutOf(o)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%v: %s, %v; want %s, %q", tc.ann, got, err, tc.want, tc.err)
		}
	}
}

func TestWithFinalizerAndCountDeleting(t *testing.T) {
	mk := func(name string, deleting bool, fins ...string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		o.SetName(name)
		o.SetFinalizers(fins)
		if deleting {
			now := metav1.Now()
			o.SetDeletionTimestamp(&now)
		}
		return o
	}
	fin := parentFinalizer("DecoratorController", "d")
	if fin != "metacontroller.io/decoratorcontroller-d" || parentFinalizer("CompositeController", "c") != "metacontroller.io/compositecontroller-c" {
		t.Fatalf("parent finalizers %s", fin)
	}
	objs := []*unstructured.Unstructured{mk("a", false, fin), mk("b", false, "other"), mk("c", true, "other", fin), mk("d", true)}
	got := withFinalizer(objs, fin)
	var names []string
	for _, o := range got {
		names = append(names, o.GetName())
	}
	if strings.Join(names, ",") != "a,c" {
		t.Errorf("withFinalizer: %v", names)
	}
	if deleting, live := countDeleting(got); deleting != 1 || live != 1 {
		t.Errorf("countDeleting: %d deleting, %d live", deleting, live)
	}
}
