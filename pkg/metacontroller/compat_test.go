package metacontroller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

// TestRelatedScope: the namespace rules of a related rule by customize
// hook version and parent scope (Metacontroller's customize manager).
func TestRelatedScope(t *testing.T) {
	cm := resource{gvk: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, namespaced: true}
	ns := resource{gvk: namespaceGVK}
	sel := labels.Everything()
	for _, tc := range []struct {
		name     string
		rule     relatedRule
		version  mcv1a1.HookVersion
		parentNS string
		wantNS   string
		wantErr  bool
	}{
		{"v1 namespaced parent, no namespace: the parent's", relatedRule{res: cm, labels: sel}, mcv1a1.HookVersionV1, "target", "target", false},
		{"v1 namespaced parent, names in the same namespace", relatedRule{res: cm, namespace: "target", names: map[string]bool{"a": true}}, mcv1a1.HookVersionV1, "target", "target", false},
		{"v1 namespaced parent, names in another namespace: error", relatedRule{res: cm, namespace: "source", names: map[string]bool{"a": true}}, mcv1a1.HookVersionV1, "target", "", true},
		{"v1 namespaced parent, labelSelector in another namespace", relatedRule{res: cm, namespace: "source", labels: sel}, mcv1a1.HookVersionV1, "target", "source", false},
		{"v1 namespaced parent, namespaceSelector", relatedRule{res: cm, nsSel: sel}, mcv1a1.HookVersionV1, "target", "", false},
		{"v1 namespaced parent, cluster-scoped resource", relatedRule{res: ns, labels: sel}, mcv1a1.HookVersionV1, "target", "", false},
		{"v2 namespaced parent, no namespace: every namespace", relatedRule{res: cm, labels: sel}, mcv1a1.HookVersionV2, "target", "", false},
		{"v2 namespaced parent, names in another namespace", relatedRule{res: cm, namespace: "source", names: map[string]bool{"a": true}}, mcv1a1.HookVersionV2, "target", "source", false},
		{"v1 cluster-scoped parent, no namespace: every namespace", relatedRule{res: cm, labels: sel}, mcv1a1.HookVersionV1, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := tc.rule
			err := relatedScope(&rule, tc.version, tc.parentNS, "relatedResources[0]")
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "relatedResources[0].namespace: ") {
					t.Errorf("error without the rule's path: %v", err)
				}
				return
			}
			if rule.namespace != tc.wantNS {
				t.Errorf("namespace %q, want %q", rule.namespace, tc.wantNS)
			}
		})
	}
}

func TestCustomizeVersion(t *testing.T) {
	v2 := mcv1a1.HookVersionV2
	for _, tc := range []struct {
		ctrl any
		want mcv1a1.HookVersion
	}{
		{&mcv1a1.CompositeController{}, mcv1a1.HookVersionV1},
		{&mcv1a1.CompositeController{Spec: mcv1a1.CompositeControllerSpec{Hooks: &mcv1a1.CompositeControllerHooks{
			Sync: &mcv1a1.Hook{Version: &v2}}}}, mcv1a1.HookVersionV1},
		{&mcv1a1.CompositeController{Spec: mcv1a1.CompositeControllerSpec{Hooks: &mcv1a1.CompositeControllerHooks{
			Customize: &mcv1a1.Hook{Version: &v2}}}}, mcv1a1.HookVersionV2},
		{&mcv1a1.DecoratorController{Spec: mcv1a1.DecoratorControllerSpec{Hooks: &mcv1a1.DecoratorControllerHooks{
			Customize: &mcv1a1.Hook{Version: ptr.To(mcv1a1.HookVersionV2)}}}}, mcv1a1.HookVersionV2},
	} {
		if got := customizeVersion(tc.ctrl); got != tc.want {
			t.Errorf("%T: %q, want %q", tc.ctrl, got, tc.want)
		}
	}
}

// TestRevisionName: Metacontroller's ControllerRevision names. The hashes
// were computed with sha1sum over "<uid><patch JSON>".
func TestRevisionName(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{}}
	parent.SetUID(types.UID("uid-1"))
	patch := map[string]any{"spec": map[string]any{"template": map[string]any{"version": "v1"}}}
	c := &composite{parent: resource{gvr: schema.GroupVersionResource{Group: "e2e.dcontroller.io", Version: "v1", Resource: "rollsets"}}}
	if got, want := c.revisionName(parent, patch), "rollsets.e2e.dcontroller.io-5dcb946e795a16713cd1bc148b28c107d55d4165"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
	core := &composite{parent: resource{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}}
	if got := core.revisionName(parent, patch); !strings.HasPrefix(got, "configmaps.core-") {
		t.Errorf("core group name %q, want the prefix configmaps.core-", got)
	}
	long := &composite{parent: resource{gvr: schema.GroupVersionResource{Group: strings.Repeat("g", 300), Resource: "xs"}}}
	if got := long.revisionName(parent, patch); len(got) != 253 {
		t.Errorf("long name of %d characters, want 253", len(got))
	}
}

func TestSamePatch(t *testing.T) {
	if !samePatch(nil, map[string]any{}) {
		t.Error("a missing patch differs from an empty one")
	}
	if !samePatch(map[string]any{"spec": map[string]any{"n": int64(3)}}, map[string]any{"spec": map[string]any{"n": float64(3)}}) {
		t.Error("3 and 3.0 differ")
	}
	if samePatch(map[string]any{"spec": map[string]any{"n": int64(3)}}, map[string]any{"spec": map[string]any{"n": int64(4)}}) {
		t.Error("3 and 4 are the same")
	}
}
