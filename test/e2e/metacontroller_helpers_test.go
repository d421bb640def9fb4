package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// crdYAML is a schemaless CRD in the group e2e.dcontroller.io with a status
// subresource.
func crdYAML(kind, plural, scope string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]s.e2e.dcontroller.io
spec:
  group: e2e.dcontroller.io
  scope: %[3]s
  names: {kind: %[1]s, plural: %[2]s, singular: %[4]s, listKind: %[1]sList}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, kind, plural, scope, strings.ToLower(kind))
}

// crdYAMLNoStatus is crdYAML without the status subresource: a status
// is then part of the main resource (written by an update of the whole
// object, which bumps metadata.generation).
func crdYAMLNoStatus(kind, plural, scope string) string {
	return strings.Replace(crdYAML(kind, plural, scope), "      subresources: {status: {}}\n", "", 1)
}

// installCRD applies a CRD and waits until it is established.
func installCRD(t *testing.T, kind, plural, scope string) {
	t.Helper()
	mustKubectl(t, crdYAML(kind, plural, scope), "apply", "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+plural+".e2e.dcontroller.io")
}

// hookServer is an httptest webhook whose handler maps a decoded request
// to a response, counting calls.
type hookServer struct {
	*httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	reqs  []map[string]any
}

func newHookServer(t *testing.T, fn func(req map[string]any) any) *hookServer {
	t.Helper()
	h := &hookServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.serve(t, w, r, fn)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) serve(t *testing.T, w http.ResponseWriter, r *http.Request, fn func(req map[string]any) any) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Errorf("hook: invalid request: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.calls.Add(1)
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	h.mu.Unlock()
	resp := fn(req)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// last returns the last request the hook received.
func (h *hookServer) last() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.reqs) == 0 {
		return nil
	}
	return h.reqs[len(h.reqs)-1]
}

// path reads a nested value of a decoded JSON object ("a.b.c").
func path(m map[string]any, p string) any {
	var cur any = m
	for _, k := range strings.Split(p, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// getObj reads an object with the test client (not cached).
func getObj(t *testing.T, apiVersion, kind, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	return u, err
}

// listObjs lists the objects of a kind in a namespace.
func listObjs(t *testing.T, apiVersion, kind, ns string) []unstructured.Unstructured {
	t.Helper()
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind+"List"))
	if err := k8sClient.List(context.Background(), l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// stable asserts that the hook settles (a second without calls within 15s)
// and then gets no call during d: no hot loop.
func stable(t *testing.T, h *hookServer, d time.Duration) {
	t.Helper()
	settle(t, h.calls.Load)
	before := h.calls.Load()
	time.Sleep(d)
	if after := h.calls.Load(); after != before {
		t.Fatalf("hook called %d times in %s with nothing changing (hot loop)", after-before, d)
	}
}

// settle waits until calls() stays the same for a second (at most 15s).
func settle(t *testing.T, calls func() int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	last, since := calls(), time.Now()
	for time.Since(since) < time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("the hook never stops being called (hot loop): %d calls", last)
		}
		time.Sleep(100 * time.Millisecond)
		if n := calls(); n != last {
			last, since = n, time.Now()
		}
	}
}

func isNotFound(err error) bool { return err != nil && strings.Contains(err.Error(), "not found") }

// applyMC applies CompositeController/DecoratorController manifests and
// deletes them when the test ends, so that no controller outlives its test
// (and its hook server). Call it after startManager and newHookServer, so
// that the deletion runs while both still do.
func applyMC(t *testing.T, manifests string) {
	t.Helper()
	mustKubectl(t, manifests, "apply", "-f", "-")
	// Waits (bounded) for the objects to go: a controller with a finalize
	// hook carries a cleanup finalizer that the still-running manager
	// removes once it has released the controller's parents.
	t.Cleanup(func() {
		_, _ = kubectl(t, manifests, "delete", "--ignore-not-found", "--wait=true", "--timeout=30s", "-f", "-")
	})
}
