package object

import (
	"math"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateMetadata(t *testing.T) {
	for _, tc := range []struct {
		name       string
		metadata   any
		namespaced bool
		// fields are the cause field paths of an Invalid error, "" for a
		// valid object, or "400:" and part of a BadRequest's message.
		fields string
	}{
		{"valid", map[string]any{"name": "a.b-c", "namespace": "ns", "labels": map[string]any{"app": "x"}}, true, ""},
		{"cluster-scoped", map[string]any{"name": "a"}, false, ""},
		{"generateName only (names are generated before validation)", map[string]any{"generateName": "a-", "namespace": "ns"}, true, "metadata.name"},
		{"upper case (the successor's view names)", map[string]any{"name": "test-service-1-TCP-80", "namespace": "ns"}, true, ""},
		{"punctuation and a colon", map[string]any{"name": "Bad_Name!:x", "namespace": "ns"}, true, ""},
		{"253 bytes", map[string]any{"name": strings.Repeat("a", 253), "namespace": "ns"}, true, ""},
		{"slash", map[string]any{"name": "a/b", "namespace": "ns"}, true, "metadata.name"},
		{"percent", map[string]any{"name": "a%2Fb", "namespace": "ns"}, true, "metadata.name"},
		{"dot", map[string]any{"name": ".", "namespace": "ns"}, true, "metadata.name"},
		{"dot dot", map[string]any{"name": "..", "namespace": "ns"}, true, "metadata.name"},
		{"generateName with a slash", map[string]any{"generateName": "a/", "name": "a", "namespace": "ns"}, true, "metadata.generateName"},
		{"too long", map[string]any{"name": strings.Repeat("a", 254), "namespace": "ns"}, true, "metadata.name"},
		{"not UTF-8", map[string]any{"name": "a\xffb", "namespace": "ns"}, true, "metadata.name"},
		{"no name", map[string]any{"namespace": "ns"}, true, "metadata.name"},
		{"labels as a list", map[string]any{"name": "a", "namespace": "ns", "labels": []any{"a"}}, true, "400:ObjectMeta.labels"},
		{"label value not a string", map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"a": 1.0}}, true, "400:ObjectMeta.labels"},
		{"bad label key", map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"a b": "x"}}, true, "metadata.labels"},
		{"bad label value", map[string]any{"name": "a", "namespace": "ns", "labels": map[string]any{"a": "x y"}}, true, "metadata.labels"},
		{"annotations as a string", map[string]any{"name": "a", "namespace": "ns", "annotations": "x"}, true, "400:ObjectMeta.annotations"},
		{"name not a string", map[string]any{"name": 5.0, "namespace": "ns"}, true, "400:ObjectMeta.name"},
		{"metadata not an object", "x", true, "400:ObjectMeta"},
		{"bad namespace", map[string]any{"name": "a", "namespace": "Not_A_Label"}, true, "metadata.namespace"},
		{"namespace missing", map[string]any{"name": "a"}, true, "metadata.namespace"},
		{"namespace on cluster-scoped", map[string]any{"name": "a", "namespace": "ns"}, false, "metadata.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "op.view.dcontroller.io/v1alpha1", "kind": "Summary", "metadata": tc.metadata}}
			err := ValidateMetadata(u, tc.namespaced)
			if tc.fields == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if want, ok := strings.CutPrefix(tc.fields, "400:"); ok {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "Summary in version \"v1alpha1\" cannot be handled as a Summary: json: cannot unmarshal") ||
					!strings.Contains(err.Error(), want) {
					t.Errorf("want a BadRequest naming %s, got %v", want, err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			st := err.(apierrors.APIStatus).Status()
			if st.Code != 422 || st.Details == nil || st.Details.Kind != "Summary" || st.Details.Group != "op.view.dcontroller.io" {
				t.Fatalf("status: %+v", st)
			}
			var fields []string
			for _, c := range st.Details.Causes {
				fields = append(fields, c.Field)
			}
			if got := strings.Join(fields, ","); !strings.HasPrefix(got, tc.fields) {
				t.Errorf("causes at %q, want %q: %v", got, tc.fields, err)
			}
		})
	}
}

// TestNameRule: each kind's metadata.name rule, as kube-apiserver applies
// it (views excepted: their rule is ours, see ValidateViewName).
func TestNameRule(t *testing.T) {
	view := schema.GroupKind{Group: "op.view.dcontroller.io", Kind: "ServiceView"}
	configMap := schema.GroupKind{Kind: "ConfigMap"}
	cr := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	role := schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}
	clusterRoleBinding := schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}
	for _, tc := range []struct {
		gk    schema.GroupKind
		name  string
		valid bool
	}{
		{view, "web-TCP-80", true},
		{view, "system:web", true},
		{view, "a b", true},
		{view, "Ünïcode", true},
		{view, "a/b", false},
		{view, "a%b", false},
		{view, "..", false},
		{view, strings.Repeat("A", 253), true},
		{view, strings.Repeat("A", 254), false},
		{view, "\xff", false},
		{configMap, "web-tcp-80", true},
		{configMap, "web-TCP-80", false},
		{configMap, "system:web", false},
		{cr, "web-TCP-80", false},
		{role, "system:controller:Web", true},
		{role, "a/b", false},
		{role, strings.Repeat("a", 300), true}, // kube-apiserver bounds no RBAC name
		{clusterRoleBinding, "Admin:Web", true},
		{schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Other"}, "A", false},
		{schema.GroupKind{Group: "view.dcontroller.io", Kind: "X"}, "A", false}, // not a view group: no operator name
	} {
		msgs := NameRule(tc.gk)(tc.name, false)
		if (len(msgs) == 0) != tc.valid {
			t.Errorf("%s %.20q: valid %v, want %v (%v)", tc.gk, tc.name, len(msgs) == 0, tc.valid, msgs)
		}
	}
}

func TestValidateKind(t *testing.T) {
	path := field.NewPath("spec", "controllers").Index(0).Child("target", "kind")
	for kind, valid := range map[string]bool{
		"AppSummary": true, "Pod": true, "Endpoints": true, "A": true, "my-kind": true, "Kind2": true,
		"": false, "@@@": false, "my_kind": false, "2Kind": false, "Kind-": false, "App Summary": false,
		"🙂": false, "Ä": false, "\u212a": false, strings.Repeat("A", 64): false,
	} {
		errs := ValidateKind(kind, path)
		if valid != (len(errs) == 0) {
			t.Errorf("ValidateKind(%q) = %v, want valid=%v", kind, errs, valid)
			continue
		}
		if !valid && !strings.HasPrefix(errs[0].Error(), "spec.controllers[0].target.kind: ") {
			t.Errorf("ValidateKind(%q): error without the spec path: %v", kind, errs[0])
		}
	}
}

func TestValidateEncodable(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name string
		v    any
		want string // the error, "" when valid
	}{
		{"finite", map[string]any{"a": 1.5, "b": int64(2), "c": []any{-1e308, "x", nil, true}}, ""},
		{"NaN in status", map[string]any{"status": map[string]any{"ratio": nan}}, "status.ratio: Invalid value: NaN: " + NonFiniteDetail},
		{"+Inf in a list", map[string]any{"spec": map[string]any{"xs": []any{1.0, inf}}}, "spec.xs[1]: Invalid value: +Inf: " + NonFiniteDetail},
		{"-Inf as float32", map[string]any{"a": float32(math.Inf(-1))}, "a: Invalid value: -Inf: " + NonFiniteDetail},
		{"first in sorted key order", map[string]any{"z": nan, "b": map[string]any{"y": inf, "x": 1.0}}, "b.y: Invalid value: +Inf: " + NonFiniteDetail},
		{"key that is not a name", map[string]any{"metadata": map[string]any{"x.io/a b": nan}}, "metadata[x.io/a b]: Invalid value: NaN: " + NonFiniteDetail},
		{"at the root", nan, "<nil>: Invalid value: NaN: " + NonFiniteDetail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateEncodable(tc.v, nil)
			if tc.want == "" {
				if len(errs) != 0 {
					t.Fatalf("ValidateEncodable = %v, want none", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Fatalf("ValidateEncodable = %v, want %q", errs, tc.want)
			}
		})
	}
}

// A value nested deeper than encoding/json decodes is refused, with no
// stack overflow; one at the bound is valid.
func TestValidateEncodableDeep(t *testing.T) {
	deep := func(n int) any {
		var v any = 1.0
		for range n {
			v = map[string]any{"a": v}
		}
		return v
	}
	if errs := ValidateEncodable(deep(MaxNesting), nil); len(errs) != 0 {
		t.Fatalf("ValidateEncodable(%d levels) = %v, want none", MaxNesting, errs)
	}
	errs := ValidateEncodable(deep(MaxNesting+1), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "nested more than 10000 levels deep") {
		t.Fatalf("ValidateEncodable(%d levels) = %v, want a nesting error", MaxNesting+1, errs)
	}
	// The path names the first levels only.
	if n := len(errs[0].Error()); n > 500 {
		t.Fatalf("the nesting error is %d bytes long: %.200s", n, errs[0].Error())
	}
	var l any = "x"
	for range 100000 {
		l = []any{l}
	}
	if errs := ValidateEncodable(l, nil); len(errs) != 1 {
		t.Fatalf("ValidateEncodable(100000 levels) = %v, want one error", errs)
	}
}
