package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

func objectKey(ns, name string) object.Key { return object.Key{Namespace: ns, Name: name} }

func TestMain(m *testing.M) {
	quietKlog()
	os.Exit(m.Run())
}

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
	s := runServer(t, opts)
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
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
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

// TestWatchBookmarksAndWatchList: a watch with allowWatchBookmarks gets
// BOOKMARK events while quiet; a watch-list request (sendInitialEvents)
// gets the current state, then a bookmark annotated
// k8s.io/initial-events-end.
func TestWatchBookmarksAndWatchList(t *testing.T) {
	store := view.NewStore()
	for _, n := range []string{"a", "b"} {
		if _, err := store.Create(summary("default", n, map[string]any{"n": int64(1)})); err != nil {
			t.Fatal(err)
		}
	}
	_, base := testServer(t, store, Options{BookmarkInterval: 100 * time.Millisecond})
	coll := base + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries"
	_, body := get(t, coll+"?watch=true&allowWatchBookmarks=true&resourceVersion="+store.ResourceVersion()+"&timeoutSeconds=1", "")
	if !strings.Contains(body, `"type":"BOOKMARK"`) || strings.Contains(body, `"type":"ADDED"`) {
		t.Errorf("quiet watch with bookmarks:\n%s", body)
	}
	code, body := get(t, coll+"?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1", "")
	if code != 200 || strings.Count(body, `"type":"ADDED"`) != 2 || !strings.Contains(body, `"k8s.io/initial-events-end":"true"`) {
		t.Errorf("watch list: %d\n%s", code, body)
	}
	// A bookmark's resourceVersion resumes the watch.
	var ev struct {
		Type   string
		Object struct {
			Metadata struct{ ResourceVersion string }
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		_ = json.Unmarshal([]byte(line), &ev)
	}
	if _, err := store.Update(summary("default", "a", map[string]any{"n": int64(2)})); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, coll+"?watch=true&timeoutSeconds=1&resourceVersion="+ev.Object.Metadata.ResourceVersion, "")
	if strings.Count(body, `"type":`) != 1 || !strings.Contains(body, `"type":"MODIFIED"`) {
		t.Errorf("watch resumed from bookmark %s:\n%s", ev.Object.Metadata.ResourceVersion, body)
	}
}

// TestInformer: a client-go dynamic informer (reflector list+watch with
// bookmarks) syncs from the server and follows the store.
func TestInformer(t *testing.T) {
	store := view.NewStore()
	if _, err := store.Create(summary("default", "a", nil)); err != nil {
		t.Fatal(err)
	}
	_, base := testServer(t, store, Options{BookmarkInterval: 200 * time.Millisecond})
	dc, err := dynamic.NewForConfig(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	gvr := summaryGVK.GroupVersion().WithResource("summaries")
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	inf := factory.ForResource(gvr)
	var mu sync.Mutex
	seen := map[string]string{}
	_, _ = inf.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			mu.Lock()
			defer mu.Unlock()
			seen[o.(*unstructured.Unstructured).GetName()] = "added"
		},
		UpdateFunc: func(_, o any) {
			mu.Lock()
			defer mu.Unlock()
			seen[o.(*unstructured.Unstructured).GetName()] = "updated"
		},
		DeleteFunc: func(o any) {
			mu.Lock()
			defer mu.Unlock()
			if u, ok := o.(*unstructured.Unstructured); ok {
				seen[u.GetName()] = "deleted"
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	_, _ = store.Create(summary("default", "b", nil))
	_, _ = store.Update(summary("default", "a", map[string]any{"x": "y"}))
	_ = store.Delete(summaryGVK, objectKey("default", "b"))
	waitFor(t, "informer events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["a"] == "updated" && seen["b"] == "deleted"
	})
	// The dynamic client writes too.
	if _, err := dc.Resource(gvr).Namespace("default").Create(ctx, summary("default", "c", map[string]any{"k": "v"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := store.Get(summaryGVK, objectKey("default", "c")); err != nil || got.GetUID() == "" {
		t.Errorf("created through the API: %v %v", got, err)
	}
}

// TestWrites covers the write paths' checks and the concurrency of patches.
func TestWrites(t *testing.T) {
	store := view.NewStore()
	_, base := testServer(t, store, Options{Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }})
	coll := base + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries"
	const js = "application/json"
	obj := func(meta string) string {
		return `{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Summary","metadata":{` + meta + `},"spec":{"n":1}}`
	}
	cases := []struct {
		name, method, url, ct, body string
		code                        int
		want                        string
	}{
		{"generateName", "POST", coll, js, obj(`"generateName":"gen-"`), 201, `"name":"gen-`},
		{"create", "POST", coll, js, obj(`"name":"a","labels":{"k":"v"}`), 201, `"generation":1`},
		{"duplicate", "POST", coll, js, obj(`"name":"a"`), 409, `"reason":"AlreadyExists"`},
		{"resourceVersion on create", "POST", coll, js, obj(`"name":"b","resourceVersion":"5"`), 400, "resourceVersion should not be set"},
		{"invalid label", "POST", coll, js, obj(`"name":"c","labels":{"bad key!":"v"}`), 422, `"reason":"Invalid"`},
		{"invalid name", "POST", coll, js, obj(`"name":"a/b"`), 422, `"reason":"Invalid"`},
		{"wrong kind", "POST", coll, js, `{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Other","metadata":{"name":"x"}}`, 400, "does not match the resource"},
		{"wrong group", "POST", coll, js, `{"apiVersion":"x/v1","kind":"Summary","metadata":{"name":"x"}}`, 400, ""},
		{"namespace mismatch", "POST", coll, js, obj(`"name":"x","namespace":"other"`), 400, "does not match the namespace"},
		{"name mismatch on update", "PUT", coll + "/a", js, obj(`"name":"z"`), 400, "does not match the name"},
		{"stale update", "PUT", coll + "/a", js, obj(`"name":"a","resourceVersion":"1"`), 409, `"reason":"Conflict"`},
		{"update of a missing object", "PUT", coll + "/nope", js, obj(`"name":"nope"`), 404, `"reason":"NotFound"`},
		{"merge patch", "PATCH", coll + "/a", "application/merge-patch+json", `{"spec":{"m":2}}`, 200, `"m":2`},
		{"json patch", "PATCH", coll + "/a", "application/json-patch+json", `[{"op":"add","path":"/spec/j","value":3}]`, 200, `"j":3`},
		{"strategic patch as merge", "PATCH", coll + "/a", "application/strategic-merge-patch+json", `{"spec":{"s":4,"n":null}}`, 200, `"s":4`},
		{"strategic directive", "PATCH", coll + "/a", "application/strategic-merge-patch+json", `{"spec":{"$patch":"replace"}}`, 415, "directives"},
		{"apply", "PATCH", coll + "/applied?fieldManager=me", "application/apply-patch+yaml", "apiVersion: op.view.dcontroller.io/v1alpha1\nkind: Summary\nmetadata:\n  name: applied\nspec:\n  a: 1\n", 201, `"manager":"me"`},
		{"dry-run delete", "DELETE", coll + "/a?dryRun=All", "", "", 200, `"name":"a"`},
		{"delete with a stale precondition", "DELETE", coll + "/a", js, `{"preconditions":{"resourceVersion":"1"}}`, 409, "precondition"},
		{"subresource", "GET", coll + "/a/status", "", "", 404, ""},
		{"cluster-wide get", "GET", base + "/apis/op.view.dcontroller.io/v1alpha1/summaries/a", "", "", 404, ""},
		{"unknown field selector", "GET", coll + "?fieldSelector=spec.n%3D1", "", "", 400, "field label not supported"},
		{"exact list of a version newer than the store", "GET", coll + "?resourceVersion=999999&resourceVersionMatch=Exact", "", "", 410, "Expired"},
	}
	for _, c := range cases {
		code, body := do(t, c.method, c.url, c.ct, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	got, _ := store.Get(summaryGVK, objectKey("default", "a"))
	if spec := got.Object["spec"].(map[string]any); spec["n"] != nil || spec["s"] != int64(4) || got.GetGeneration() != 4 {
		t.Errorf("after the patches: %v generation %d", got.Object["spec"], got.GetGeneration())
	}

	// Concurrent merge patches of different fields are all applied: a
	// patch that raced with another is re-applied to the new state.
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := do(t, "PATCH", coll+"/a", "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"p%d":"x"}}}`, i)); code != 200 {
				t.Errorf("concurrent patch %d: %d %s", i, code, body)
			}
		}()
	}
	wg.Wait()
	got, _ = store.Get(summaryGVK, objectKey("default", "a"))
	if n := len(got.GetLabels()); n != 21 {
		t.Errorf("%d labels after 20 concurrent patches, want 21: %v", n, got.GetLabels())
	}
	if code, body := do(t, "DELETE", coll+"?labelSelector=k%3Dv", "", ""); code != 200 || !strings.Contains(body, `"name":"a"`) {
		t.Errorf("deletecollection: %d %s", code, body)
	}
	if _, err := store.Get(summaryGVK, objectKey("default", "a")); err == nil {
		t.Error("deletecollection left the selected object")
	}
}

// TestNativeKinds: in standalone mode built-in kinds are served at their
// usual paths, with their scope and short names, and take kubectl's
// strategic merge patches with the merge keys of their Go types.
func TestNativeKinds(t *testing.T) {
	store := view.NewStore()
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	ns := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	_, base := testServer(t, store, Options{ServeNativeKinds: true, Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{pod, ns} }})
	code, body := get(t, base+"/api/v1", "")
	if code != 200 || !strings.Contains(body, `"name":"pods","singularName":"pod","namespaced":true`) || !strings.Contains(body, `"shortNames":["po"]`) ||
		!strings.Contains(body, `"name":"namespaces","singularName":"namespace","namespaced":false`) {
		t.Errorf("/api/v1: %d %s", code, body)
	}
	if _, agg := get(t, base+"/api", aggregatedAccept); !strings.Contains(agg, `"resource":"pods"`) {
		t.Errorf("aggregated /api: %s", agg)
	}
	pods := base + "/api/v1/namespaces/default/pods"
	podJSON := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}}`
	if code, body := do(t, "POST", pods, "application/json", podJSON); code != 201 {
		t.Fatalf("create pod: %d %s", code, body)
	}
	// Strategic merge: container b's image changes, a is kept (merge key name).
	code, body = do(t, "PATCH", pods+"/p", "application/strategic-merge-patch+json", `{"spec":{"containers":[{"name":"b","image":"z"}]}}`)
	if code != 200 || !strings.Contains(body, `{"image":"x","name":"a"}`) || !strings.Contains(body, `{"image":"z","name":"b"}`) {
		t.Errorf("strategic merge patch: %d %s", code, body)
	}
	if code, body := do(t, "POST", base+"/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}`); code != 201 {
		t.Errorf("create namespace: %d %s", code, body)
	}
	if code, _ := get(t, base+"/api/v1/namespaces/team", ""); code != 200 {
		t.Errorf("get namespace: %d", code)
	}

	// A typed client speaking protobuf (as kubectl create does).
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: base, ContentConfig: rest.ContentConfig{
		ContentType: "application/vnd.kubernetes.protobuf", AcceptContentTypes: "application/vnd.kubernetes.protobuf"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	created, err := cs.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, metav1.CreateOptions{})
	if err != nil || created.UID == "" || created.Spec.Containers[0].Image != "img" {
		t.Fatalf("protobuf create: %v %+v", err, created)
	}
	w, err := cs.CoreV1().Pods("team").Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created.Spec.Containers[0].Image = "img2"
	if _, err := cs.CoreV1().Pods("team").Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("protobuf update: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); !ok || ev.Type != "MODIFIED" || p.Spec.Containers[0].Image != "img2" {
			t.Errorf("protobuf watch event: %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(5 * time.Second):
		t.Error("no protobuf watch event")
	}
	l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "typed" {
		t.Errorf("protobuf list: %v %+v", err, l)
	}
	got, _ := store.Get(pod, objectKey("team", "typed"))
	if got == nil || got.GetLabels()["a"] != "b" {
		t.Errorf("stored: %v", got)
	}
}

func TestConflictMessage(t *testing.T) {
	store := view.NewStore()
	_, _ = store.Create(summary("default", "a", nil))
	_, base := testServer(t, store, Options{})
	code, body := do(t, "PUT", base+"/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries/a", "application/json",
		`{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Summary","metadata":{"name":"a","resourceVersion":"99"}}`)
	var st struct{ Message string }
	_ = json.Unmarshal([]byte(body), &st)
	if code != 409 || st.Message != `Operation cannot be fulfilled on summaries.op.view.dcontroller.io "a": the object has been modified; resourceVersion 99 is not the latest (1)` {
		t.Errorf("conflict: %d %s", code, st.Message)
	}
}
