package e2e

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const teardownCC = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: teardown-controller
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.dcontroller.io/v1
    resource: stacks
  childResources:
    - apiVersion: v1
      resource: configmaps
  hooks:
    sync:
      version: v2
      webhook:
        url: %[1]s/sync
        caBundle:
          secretRef: {name: hook-ca, namespace: e2e-mc-finalize}
        authorization:
          secretRef: {name: hook-token, namespace: e2e-mc-finalize, key: token}
    finalize:
      version: v2
      webhook:
        url: %[1]s/finalize
        caBundle:
          secretRef: {name: hook-ca, namespace: e2e-mc-finalize}
        authorization:
          secretRef: {name: hook-token, namespace: e2e-mc-finalize, key: token}
`

// TestMetacontrollerFinalizeOrderedTeardown: hooks served over HTTPS with a
// private CA (caBundle.secretRef) and a bearer token (authorization
// secretRef), using the v2 contract (children keyed "<namespace>/<name>").
// Deleting the parent calls the finalize hook, which tears the children
// down one at a time (c, then b, then a); the finalizer goes when it
// answers finalized: true.
func TestMetacontrollerFinalizeOrderedTeardown(t *testing.T) {
	const ns = "e2e-mc-finalize"
	installCRD(t, "Stack", "stacks", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)

	var mu sync.Mutex
	var unauthorized int
	var syncKeys []string
	var teardown []string // observed children of each finalize call
	order := []string{"a", "b", "c"}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			mu.Lock()
			unauthorized++
			mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(body, &req)
		kids, _ := path(req, "children").(map[string]any)["ConfigMap.v1"].(map[string]any)
		var observed []string
		for k := range kids {
			observed = append(observed, k)
		}
		sort.Strings(observed)
		child := func(n string) any {
			return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "stack-" + n}, "data": map[string]any{"part": n}}
		}
		var resp map[string]any
		mu.Lock()
		if r.URL.Path == "/finalize" {
			s := strings.Join(observed, ",")
			if len(teardown) == 0 || teardown[len(teardown)-1] != s {
				teardown = append(teardown, s)
			}
			// Keep every observed child but the last in order.
			var children []any
			kept := 0
			for _, n := range order {
				if kids[ns+"/stack-"+n] != nil {
					kept++
				}
			}
			for i, n := range order {
				if kids[ns+"/stack-"+n] != nil && i < kept-1 {
					children = append(children, child(n))
				}
			}
			resp = map[string]any{"children": children, "finalized": len(observed) == 0}
		} else {
			syncKeys = observed
			var children []any
			for _, n := range order {
				children = append(children, child(n))
			}
			resp = map[string]any{"children": children, "status": map[string]any{"parts": len(observed)}}
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	secrets := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: hook-ca, namespace: %[1]s}
stringData:
  ca.crt: |
%[2]s
---
apiVersion: v1
kind: Secret
metadata: {name: hook-token, namespace: %[1]s}
stringData: {token: s3cret}
`, ns, indent(caPEM, "    "))
	mustKubectl(t, secrets, "apply", "-f", "-")
	startManager(t)
	applyMC(t, fmt.Sprintf(teardownCC, srv.URL))
	mustKubectl(t, `apiVersion: e2e.dcontroller.io/v1
kind: Stack
metadata: {name: app, namespace: e2e-mc-finalize}
spec: {}
`, "apply", "-f", "-")

	eventually(t, 30*time.Second, func() string {
		p, err := getObj(t, "e2e.dcontroller.io/v1", "Stack", ns, "app")
		if err != nil {
			return err.Error()
		}
		if str(path(p.Object, "status.parts")) != "3" {
			return fmt.Sprintf("status %v", p.Object["status"])
		}
		if f := p.GetFinalizers(); len(f) != 1 || f[0] != "metacontroller.io/compositecontroller-teardown-controller" {
			return fmt.Sprintf("finalizers %v", f)
		}
		return ""
	})
	mu.Lock()
	keys := strings.Join(syncKeys, ",")
	mu.Unlock()
	if keys != ns+"/stack-a,"+ns+"/stack-b,"+ns+"/stack-c" {
		t.Errorf("v2 child keys %q, want <namespace>/<name>", keys)
	}

	mustKubectl(t, "", "-n", ns, "delete", "stack.e2e.dcontroller.io", "app", "--wait=false")
	eventually(t, 60*time.Second, func() string {
		if _, err := getObj(t, "e2e.dcontroller.io/v1", "Stack", ns, "app"); !isNotFound(err) {
			return fmt.Sprintf("parent still there (%v)", err)
		}
		return ""
	})
	for _, n := range order {
		if _, err := getObj(t, "v1", "ConfigMap", ns, "stack-"+n); !isNotFound(err) {
			t.Errorf("stack-%s survived the teardown (%v)", n, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(teardown, " | "); got != fmt.Sprintf("%[1]s/stack-a,%[1]s/stack-b,%[1]s/stack-c | %[1]s/stack-a,%[1]s/stack-b | %[1]s/stack-a | ", ns) {
		t.Errorf("teardown order: %s", got)
	}
	if unauthorized != 0 {
		t.Errorf("%d calls without the bearer token", unauthorized)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
