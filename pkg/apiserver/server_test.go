package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/view"
)

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
