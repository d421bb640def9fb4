package hookapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

func TestTypeKey(t *testing.T) {
	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		want string
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "Pod.v1"},
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, "StatefulSet.apps/v1"},
		{schema.GroupVersionKind{Group: "ctl.example.com", Version: "v1beta1", Kind: "CatSet"}, "CatSet.ctl.example.com/v1beta1"},
	} {
		if got := TypeKey(tc.gvk); got != tc.want {
			t.Errorf("TypeKey(%v) = %q, want %q", tc.gvk, got, tc.want)
		}
		back, err := ParseTypeKey(tc.want)
		if err != nil || back != tc.gvk {
			t.Errorf("ParseTypeKey(%q) = %v, %v; want %v", tc.want, back, err, tc.gvk)
		}
	}
	for _, bad := range []string{"", "Pod", ".v1", "Pod.", "Pod.a/b/c"} {
		if _, err := ParseTypeKey(bad); err == nil {
			t.Errorf("ParseTypeKey(%q): want an error", bad)
		}
	}
}

func TestObjectKey(t *testing.T) {
	pod := obj("v1", "Pod", "ns1", "web")
	node := obj("v1", "Namespace", "", "ns1")
	for _, tc := range []struct {
		version   mcv1a1.HookVersion
		parentNS  string
		o         *unstructured.Unstructured
		want      string
		rationale string
	}{
		{"", "ns1", pod, "web", "v1 default, same scope: name"},
		{mcv1a1.HookVersionV1, "ns1", pod, "web", "v1, same scope: name"},
		{mcv1a1.HookVersionV1, "", pod, "ns1/web", "v1, cluster parent, namespaced child"},
		{mcv1a1.HookVersionV1, "", node, "ns1", "v1, cluster parent, cluster child"},
		{mcv1a1.HookVersionV2, "ns1", pod, "ns1/web", "v2, namespaced object: always namespace/name"},
		{mcv1a1.HookVersionV2, "", pod, "ns1/web", "v2, cluster parent"},
		{mcv1a1.HookVersionV2, "", node, "ns1", "v2, cluster-scoped object: name"},
	} {
		if got := ObjectKey(tc.version, tc.parentNS, tc.o); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.rationale, got, tc.want)
		}
	}
}

// TestCompositeRequestRoundTrip encodes a request in both key versions,
// compares with the expected JSON and decodes it back.
func TestCompositeRequestRoundTrip(t *testing.T) {
	cc := &mcv1a1.CompositeController{
		TypeMeta:   metav1.TypeMeta{APIVersion: "metacontroller.k8s.io/v1alpha1", Kind: "CompositeController"},
		ObjectMeta: metav1.ObjectMeta{Name: "podservice"},
		Spec: mcv1a1.CompositeControllerSpec{
			ParentResource:   mcv1a1.CompositeControllerParentResourceRule{ResourceRule: mcv1a1.ResourceRule{APIVersion: "example.com/v1", Resource: "podservices"}},
			ChildResources:   []mcv1a1.CompositeControllerChildResourceRule{{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "pods"}}},
			GenerateSelector: ptr.To(true),
			Hooks: &mcv1a1.CompositeControllerHooks{Sync: &mcv1a1.Hook{
				Version: ptr.To(mcv1a1.HookVersionV2),
				Webhook: &mcv1a1.Webhook{URL: ptr.To("http://hook/sync"), Timeout: &metav1.Duration{Duration: 10e9}},
			}},
		},
	}
	for _, tc := range []struct {
		version  mcv1a1.HookVersion
		parentNS string
		wantKeys string
	}{
		{mcv1a1.HookVersionV1, "default", `"Pod.v1":{"web":`},
		{mcv1a1.HookVersionV2, "default", `"Pod.v1":{"default/web":`},
		{mcv1a1.HookVersionV1, "", `"Pod.v1":{"default/web":`},
	} {
		parent := obj("example.com/v1", "PodService", tc.parentNS, "web")
		req := CompositeRequest{Controller: cc, Parent: parent, Children: ObjectMap{}, Related: ObjectMap{}}
		req.Children.Init(schema.GroupVersionKind{Version: "v1", Kind: "Service"})
		req.Children.Insert(tc.version, tc.parentNS, obj("v1", "Pod", "default", "web"))
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{tc.wantKeys, `"Service.v1":{}`, `"related":{}`, `"finalizing":false`,
			`"generateSelector":true`, `"version":"v2"`, `"timeout":"10s"`, `"apiVersion":"example.com/v1","resource":"podservices"`} {
			if !strings.Contains(s, want) {
				t.Errorf("%s/%q: %s\nmissing %s", tc.version, tc.parentNS, s, want)
			}
		}
		var back CompositeRequest
		if err := Decode(b, true, &back); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(back.Controller, cc) {
			t.Errorf("controller round trip:\n got %+v\nwant %+v", back.Controller, cc)
		}
		if !reflect.DeepEqual(back.Children, req.Children) || !reflect.DeepEqual(back.Parent, parent) {
			t.Errorf("children/parent round trip: %v", back.Children)
		}
		b2, _ := json.Marshal(back)
		if string(b2) != s {
			t.Errorf("re-encoding differs:\n%s\n%s", b2, s)
		}
	}
}

func TestDecoratorRoundTrip(t *testing.T) {
	dc := &mcv1a1.DecoratorController{ObjectMeta: metav1.ObjectMeta{Name: "svc-per-pod"}, Spec: mcv1a1.DecoratorControllerSpec{
		Resources: []mcv1a1.DecoratorControllerResourceRule{{
			ResourceRule:       mcv1a1.ResourceRule{APIVersion: "apps/v1", Resource: "statefulsets"},
			AnnotationSelector: &mcv1a1.AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "svc-per-pod", Operator: metav1.LabelSelectorOpExists}}},
		}},
		Attachments: []mcv1a1.DecoratorControllerAttachmentRule{{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "services"},
			UpdateStrategy: &mcv1a1.DecoratorControllerAttachmentUpdateStrategy{Method: mcv1a1.ChildUpdateInPlace}}},
	}}
	req := DecoratorRequest{Controller: dc, Object: obj("apps/v1", "StatefulSet", "db", "web"), Attachments: ObjectMap{}, Related: ObjectMap{}, Finalizing: true}
	req.Attachments.Insert(mcv1a1.HookVersionV1, "db", obj("v1", "Service", "db", "web-0"))
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"object":{`, `"attachments":{"Service.v1":{"web-0":`, `"finalizing":true`, `"annotationSelector":{"matchExpressions":[{"key":"svc-per-pod","operator":"Exists"}]}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s\nmissing %s", b, want)
		}
	}
	var back DecoratorRequest
	if err := Decode(b, true, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, req) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, req)
	}

	resp := `{"labels":{"a":"1","gone":null},"annotations":{"n":"x"},"status":{"ready":3},
		"attachments":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"web-0"},"spec":{"ports":[{"port":80}]}}],
		"resyncAfterSeconds":1.5,"finalized":true}`
	var r DecoratorResponse
	if err := Decode([]byte(resp), true, &r); err != nil {
		t.Fatal(err)
	}
	if r.Labels["gone"] != nil || *r.Labels["a"] != "1" || r.ResyncAfterSeconds != 1.5 || !r.Finalized {
		t.Errorf("decoded %+v", r)
	}
	if port := r.Attachments[0]["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"]; port != int64(80) {
		t.Errorf("port decoded as %T %v, want int64 80", port, port)
	}
}

func TestCompositeResponseDecode(t *testing.T) {
	body := `{"status":{"replicas":2,"ratio":0.5},"children":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}],"resyncAfterSeconds":3}`
	var r CompositeResponse
	if err := Decode([]byte(body), true, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status["replicas"] != int64(2) || r.Status["ratio"] != 0.5 || len(r.Children) != 1 || r.ResyncAfterSeconds != 3 {
		t.Errorf("decoded %+v", r)
	}
	b, _ := json.Marshal(r)
	var again CompositeResponse
	if err := Decode(b, true, &again); err != nil || !reflect.DeepEqual(again, r) {
		t.Errorf("round trip: %v %+v", err, again)
	}

	for _, tc := range []struct {
		body        string
		strict      bool
		wantErrPart string
	}{
		{`{"status":{},"bogus":1}`, false, ""},
		{`{"status":{},"bogus":1}`, true, `unknown field "bogus"`},
		{`{"children":[],"children":[]}`, true, `duplicate field "children"`},
		{`{"children":[],"children":[]}`, false, ""},
		{`{"Children":[]}`, true, `unknown field "Children"`},
		{`not json`, false, `must be a JSON object, got "not json"`},
		{`{"children":[}`, false, "invalid JSON at byte 14"},
		// Type errors in JSON terms, with the field.
		{`{"children":{}}`, false, "children: want an array, got object"},
		{`{"status":"x"}`, false, "status: want an object, got string"},
		{`{"resyncAfterSeconds":"5"}`, false, "resyncAfterSeconds: want a number, got string"},
		{`{"resyncAfterSeconds":1e400}`, false, "resyncAfterSeconds: number 1e400 is out of range of float64"},
		// A handler that forgot to return: never "no children".
		{`null`, false, `the response must be a JSON object, got "null"`},
		{" \n null ", true, `got "null"`},
		{`[]`, false, `got "[]"`},
		{``, false, `got ""`},
	} {
		var r CompositeResponse
		err := Decode([]byte(tc.body), tc.strict, &r)
		if tc.wantErrPart == "" && err != nil {
			t.Errorf("%s strict=%v: unexpected error %v", tc.body, tc.strict, err)
		}
		if tc.wantErrPart != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrPart)) {
			t.Errorf("%s strict=%v: error %v, want %q", tc.body, tc.strict, err, tc.wantErrPart)
		}
	}
}

func TestCustomizeRoundTrip(t *testing.T) {
	body := `{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","namespace":"global","names":["settings"]},
		{"apiVersion":"v1","resource":"namespaces","labelSelector":{"matchLabels":{"team":"a"}}},
		{"apiVersion":"v1","resource":"secrets","namespaceSelector":{"matchLabels":{"env":"prod"}}}]}`
	var r CustomizeResponse
	if err := Decode([]byte(body), true, &r); err != nil {
		t.Fatal(err)
	}
	want := []*mcv1a1.RelatedResourceRule{
		{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}, Namespace: "global", Names: []string{"settings"}},
		{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "namespaces"}, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
		{ResourceRule: mcv1a1.ResourceRule{APIVersion: "v1", Resource: "secrets"}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
	}
	if !reflect.DeepEqual(r.RelatedResourceRules, want) {
		t.Errorf("got %+v", r.RelatedResourceRules)
	}
	if err := Decode([]byte(`{"relatedResources":[{"apiVersion":"v1","resource":"x","nmaes":["a"]}]}`), true, &r); err == nil ||
		!strings.Contains(err.Error(), "nmaes") {
		t.Errorf("strict decoding of a misspelt field: %v", err)
	}
	req := CustomizeRequest{Controller: map[string]any{"kind": "CompositeController"}, Parent: obj("v1", "ConfigMap", "", "p")}
	b, _ := json.Marshal(req)
	if string(b) != `{"controller":{"kind":"CompositeController"},"parent":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"}}}` {
		t.Errorf("customize request: %s", b)
	}
}

func TestObjectMapList(t *testing.T) {
	m := ObjectMap{}
	m.Insert("", "ns", obj("v1", "Pod", "ns", "b"))
	m.Insert("", "ns", obj("v1", "Pod", "ns", "a"))
	m.Insert("", "ns", obj("apps/v1", "Deployment", "ns", "z"))
	var names []string
	for _, o := range m.List() {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	if got := strings.Join(names, ","); got != "Deployment/z,Pod/a,Pod/b" {
		t.Errorf("List order: %s", got)
	}
}
