package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

func objectKey(ns, name string) object.Key { return object.Key{Namespace: ns, Name: name} }

var summaryGVK = schema.GroupVersionKind{Group: "op.view.dcontroller.io", Version: "v1alpha1", Kind: "Summary"}

func summary(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(summaryGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// testServer runs a development-mode server on a free loopback port until
// the test ends.
func testServer(t testing.TB, store *view.Store, opts Options) (*Server, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	opts.Store = store
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	base := "http://" + s.Addr()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/version")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s, base
}

func do(t testing.TB, method, url, contentType, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeNotFoundNamesTheObject(t *testing.T) {
	store := view.NewStore()
	if _, err := store.Create(summary("default", "a", nil)); err != nil {
		t.Fatal(err)
	}
	_, base := testServer(t, store, Options{})
	code, body := do(t, "GET", base+"/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries/nope", "", "")
	var st struct{ Reason, Message string }
	_ = json.Unmarshal([]byte(body), &st)
	if code != 404 || st.Reason != "NotFound" || st.Message != `summaries.op.view.dcontroller.io "nope" not found` {
		t.Errorf("GET missing: %d %s", code, body)
	}
}

func TestImplicitNamespaces(t *testing.T) {
	_, base := testServer(t, view.NewStore(), Options{})
	code, body := do(t, "GET", base+"/api/v1/namespaces/anything", "", "")
	if b := strings.Join(strings.Fields(body), ""); code != 200 || !strings.Contains(b, `"name":"anything"`) || !strings.Contains(b, `"phase":"Active"`) {
		t.Errorf("implicit namespace: %d %s", code, body)
	}
	if code, _ := do(t, "GET", base+"/api/v1/namespaces", "", ""); code != 404 {
		t.Errorf("namespace list when no operator uses Namespaces: %d", code)
	}
}

func get(t testing.TB, url, accept string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDiscoveryFollowsKinds: a kind is discoverable (legacy and aggregated
// /apis, group and version documents, OpenAPI v2 and v3) while the store
// holds an object of it or Options.Kinds lists it.
func TestDiscoveryFollowsKinds(t *testing.T) {
	store := view.NewStore()
	var mu sync.Mutex
	extra := []schema.GroupVersionKind{}
	s, base := testServer(t, store, Options{SyncInterval: 50 * time.Millisecond, Kinds: func() []schema.GroupVersionKind {
		mu.Lock()
		defer mu.Unlock()
		return append([]schema.GroupVersionKind{}, extra...)
	}})
	served := func() bool {
		_, legacy := get(t, base+"/apis", "application/json")
		_, agg := get(t, base+"/apis", aggregatedAccept)
		return strings.Contains(legacy, `"op.view.dcontroller.io"`) && strings.Contains(agg, `"summaries"`)
	}
	if served() {
		t.Fatal("served before any object or operator")
	}
	if _, err := store.Create(summary("default", "a", nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a kind with an object to be served", served)
	code, body := get(t, base+"/apis/op.view.dcontroller.io/v1alpha1", "")
	if code != 200 || !strings.Contains(body, `"name":"summaries"`) || !strings.Contains(body, `"singularName":"summary"`) || !strings.Contains(body, `"categories":["views"]`) {
		t.Errorf("resource list: %d %s", code, body)
	}
	if code, body := get(t, base+"/apis/op.view.dcontroller.io", ""); code != 200 || !strings.Contains(body, `"preferredVersion":{"groupVersion":"op.view.dcontroller.io/v1alpha1"`) {
		t.Errorf("group: %d %s", code, body)
	}
	if code, body := get(t, base+"/openapi/v3", ""); code != 200 || !strings.Contains(body, "apis/op.view.dcontroller.io/v1alpha1") {
		t.Errorf("openapi v3 index: %d %s", code, body)
	}
	// An operator's kind is served without objects; the object's kind goes
	// when it has none left and no operator names it.
	other := schema.GroupVersionKind{Group: "other.view.dcontroller.io", Version: "v1alpha1", Kind: "Report"}
	mu.Lock()
	extra = []schema.GroupVersionKind{other}
	mu.Unlock()
	waitFor(t, "an operator's kind to be served", func() bool {
		_, b := get(t, base+"/apis", aggregatedAccept)
		return strings.Contains(b, `"reports"`)
	})
	if err := store.Delete(summaryGVK, objectKey("default", "a")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the kind without objects to go", func() bool { return !served() })
	if code, _ := get(t, base+"/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries", ""); code != 404 {
		t.Errorf("unserved kind: %d", code)
	}
	if code, _ := get(t, base+"/apis/op.view.dcontroller.io", ""); code != 404 {
		t.Errorf("unserved group: %d", code)
	}
	mu.Lock()
	extra = nil
	mu.Unlock()
	s.Sync()
	if _, b := get(t, base+"/apis", aggregatedAccept); strings.Contains(b, `"reports"`) {
		t.Errorf("the operator's kind is still served: %s", b)
	}
	if code, body := get(t, base+"/openapi/v3", ""); code != 200 || strings.Contains(body, "view.dcontroller.io") {
		t.Errorf("openapi v3 index still lists views: %s", body)
	}
}

// TestOpenAPI: the documents describe each kind as schemaless and list the
// operations kubectl looks for (PATCH with fieldValidation and the patch
// types, x-kubernetes-group-version-kind).
func TestOpenAPI(t *testing.T) {
	store := view.NewStore()
	_, base := testServer(t, store, Options{Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }})
	code, v3 := get(t, base+"/openapi/v3/apis/op.view.dcontroller.io/v1alpha1", "application/json")
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal([]byte(v3), &doc); code != 200 || err != nil {
		t.Fatalf("v3 document: %d %v", code, err)
	}
	var patch struct {
		GVK        map[string]string `json:"x-kubernetes-group-version-kind"`
		Parameters []struct{ Name, In string }
		Body       *struct {
			Content map[string]any `json:"content"`
		} `json:"requestBody"`
	}
	if err := json.Unmarshal(doc.Paths["/apis/op.view.dcontroller.io/v1alpha1/namespaces/{namespace}/summaries/{name}"]["patch"], &patch); err != nil {
		t.Fatal(err)
	}
	if patch.GVK["kind"] != "Summary" || patch.Body == nil {
		t.Fatalf("patch operation: %+v", patch)
	}
	var params []string
	for _, p := range patch.Parameters {
		params = append(params, p.In+":"+p.Name)
	}
	if !strings.Contains(strings.Join(params, " "), "query:fieldValidation") {
		t.Errorf("patch parameters %v lack fieldValidation", params)
	}
	for _, ct := range []string{"application/merge-patch+json", "application/json-patch+json", "application/apply-patch+yaml"} {
		if _, ok := patch.Body.Content[ct]; !ok {
			t.Errorf("patch content types lack %s", ct)
		}
	}
	if _, ok := patch.Body.Content["application/strategic-merge-patch+json"]; ok {
		t.Error("strategic merge patch advertised for a schemaless kind")
	}
	sch := doc.Components.Schemas["io.dcontroller.view.op.v1alpha1.Summary"]
	if sch["x-kubernetes-preserve-unknown-fields"] != true || doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] == nil {
		t.Errorf("kind schema: %v", sch)
	}
	code, v2 := get(t, base+"/openapi/v2", "application/json")
	if code != 200 || !strings.Contains(v2, `"io.dcontroller.view.op.v1alpha1.Summary"`) || !strings.Contains(v2, `"application/apply-patch+yaml"`) {
		t.Errorf("v2 document: %d %.500s", code, v2)
	}
}
