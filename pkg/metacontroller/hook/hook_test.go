package hook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

func request() *hookapi.CompositeRequest {
	return &hookapi.CompositeRequest{
		Parent: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Thing",
			"metadata": map[string]any{"name": "a", "namespace": "ns", "uid": "u1"},
			"spec":     map[string]any{"replicas": int64(2)},
		}},
		Children: hookapi.ObjectMap{"Pod.v1": {}}, Related: hookapi.ObjectMap{},
	}
}

func webhookSpec(url string) *mcv1a1.Hook {
	return &mcv1a1.Hook{Webhook: &mcv1a1.Webhook{URL: ptr.To(url)}}
}

func TestWebhookCall(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("method %s content type %q", r.Method, r.Header.Get("Content-Type"))
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = io.WriteString(w, `{"status":{"seen":2},"children":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a-0"}}]}`)
	}))
	defer srv.Close()
	c, err := New(webhookSpec(srv.URL+"/sync"), Options{Controller: "compositecontroller/t1", Hook: "sync", Path: "spec.hooks.sync"})
	if err != nil {
		t.Fatal(err)
	}
	var resp hookapi.CompositeResponse
	if err := c.Call(context.Background(), "u1", request(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status["seen"] != int64(2) || len(resp.Children) != 1 {
		t.Errorf("response %+v", resp)
	}
	if got["parent"].(map[string]any)["metadata"].(map[string]any)["name"] != "a" || got["finalizing"] != false {
		t.Errorf("request body %v", got)
	}
	if n := testutil.ToFloat64(callsTotal.WithLabelValues("compositecontroller/t1", "sync")); n != 1 {
		t.Errorf("calls metric %v, want 1", n)
	}
}

func TestWebhookFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		spec    func(url string) *mcv1a1.Hook
		reason  string
		errPart string
	}{{
		name:    "non-200",
		handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
		reason:  ReasonHTTPStatus, errPart: "status 500: boom",
	}, {
		name:    "garbage",
		handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>") },
		reason:  ReasonInvalidResponse, errPart: `must be a JSON object, got "<html>"`,
	}, {
		name:    "strict unknown field",
		handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"childs":[]}`) },
		spec: func(url string) *mcv1a1.Hook {
			h := webhookSpec(url)
			h.Webhook.ResponseUnMarshallMode = ptr.To(mcv1a1.ResponseUnmarshallModeStrict)
			return h
		},
		reason: ReasonInvalidResponse, errPart: `unknown field "childs"`,
	}, {
		name:    "v2 is strict by default",
		handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"childs":[]}`) },
		spec: func(url string) *mcv1a1.Hook {
			h := webhookSpec(url)
			h.Version = ptr.To(mcv1a1.HookVersionV2)
			return h
		},
		reason: ReasonInvalidResponse, errPart: `unknown field "childs"`,
	}, {
		name: "body over the bound",
		handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"status":{"pad":"`+strings.Repeat("x", DefaultResponseBytes)+`"}}`)
		},
		reason: ReasonInvalidResponse, errPart: "the response body is larger than 64 MiB (--hook-max-response-bytes)",
	}, {
		name: "timeout",
		handler: func(_ http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		},
		spec: func(url string) *mcv1a1.Hook {
			h := webhookSpec(url)
			h.Webhook.Timeout = &metav1.Duration{Duration: 200 * time.Millisecond}
			return h
		},
		reason: ReasonTimeout, errPart: "no response within 200ms",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			spec := webhookSpec(srv.URL)
			if tc.spec != nil {
				spec = tc.spec(srv.URL)
			}
			c, err := New(spec, Options{Controller: "compositecontroller/fail", Hook: "sync", Path: "spec.hooks.sync"})
			if err != nil {
				t.Fatal(err)
			}
			var resp hookapi.CompositeResponse
			err = c.Call(context.Background(), "", request(), &resp)
			if ReasonOf(err) != tc.reason || !strings.Contains(err.Error(), tc.errPart) || !strings.HasPrefix(err.Error(), "spec.hooks.sync: ") {
				t.Errorf("error %v (reason %q), want reason %s and %q", err, ReasonOf(err), tc.reason, tc.errPart)
			}
		})
	}
	// Connection refused.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, _ := New(webhookSpec(url), Options{Path: "spec.hooks.sync"})
	if err := c.Call(context.Background(), "", request(), &hookapi.CompositeResponse{}); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("closed server: %v", err)
	}
	if n := testutil.ToFloat64(errorsTotal.WithLabelValues("compositecontroller/fail", "sync", ReasonTimeout)); n != 1 {
		t.Errorf("timeout errors metric %v, want 1", n)
	}
}

func TestWebhookEtag(t *testing.T) {
	var calls, notModified atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("If-None-Match") == `"v1"` {
			notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = io.WriteString(w, `{"status":{"n":1}}`)
	}))
	defer srv.Close()
	spec := webhookSpec(srv.URL)
	spec.Webhook.Etag = &mcv1a1.WebhookEtagConfig{Enabled: ptr.To(true), CacheTimeoutSeconds: ptr.To(int32(60))}
	c, err := New(spec, Options{Path: "spec.hooks.sync"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		var resp hookapi.CompositeResponse
		if err := c.Call(context.Background(), "u1", request(), &resp); err != nil || resp.Status["n"] != int64(1) {
			t.Fatalf("call %d: %v %+v", i, err, resp)
		}
	}
	if calls.Load() != 3 || notModified.Load() != 2 {
		t.Errorf("calls %d, 304s %d; want 3 and 2", calls.Load(), notModified.Load())
	}
	// A 304 for a key without a cached body is an error.
	srv304 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) }))
	defer srv304.Close()
	spec = webhookSpec(srv304.URL)
	spec.Webhook.Etag = &mcv1a1.WebhookEtagConfig{Enabled: ptr.To(true)}
	c, _ = New(spec, Options{Path: "spec.hooks.sync"})
	if err := c.Call(context.Background(), "other", request(), &hookapi.CompositeResponse{}); ReasonOf(err) != ReasonHTTPStatus {
		t.Errorf("304 without cache: %v", err)
	}
}

func TestWebhookInlineCAAndEndpointConfig(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"status":{"ok":true}}`)
	}))
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	// Without the CA the system roots reject the test certificate.
	c, _ := New(webhookSpec(srv.URL), Options{Path: "spec.hooks.sync"})
	if err := c.Call(context.Background(), "", request(), &hookapi.CompositeResponse{}); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("unknown CA: %v", err)
	}
	// The CA inline in the hook.
	spec := webhookSpec(srv.URL)
	spec.Webhook.CABundle = &mcv1a1.CABundleConfig{Inline: &caPEM}
	c, err := New(spec, Options{Path: "spec.hooks.sync"})
	if err != nil {
		t.Fatal(err)
	}
	var resp hookapi.CompositeResponse
	if err := c.Call(context.Background(), "", request(), &resp); err != nil || resp.Status["ok"] != true {
		t.Errorf("inline CA: %v %+v", err, resp)
	}
	// The CA from an endpointConfigs entry matching the host.
	host := strings.TrimPrefix(srv.URL, "https://")
	c, err = New(webhookSpec(srv.URL), Options{Path: "spec.hooks.sync", EndpointConfigs: []mcv1a1.EndpointConfig{
		{Host: "other.example:443"}, {Host: strings.ToUpper(host), CABundle: &mcv1a1.CABundleConfig{Inline: &caPEM}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "", request(), &resp); err != nil {
		t.Errorf("endpointConfigs CA: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	bad := "not a pem"
	for _, tc := range []struct {
		spec    *mcv1a1.Hook
		errPart string
	}{
		{&mcv1a1.Hook{}, "spec.hooks.sync: set webhook or pipeline"},
		{&mcv1a1.Hook{Webhook: &mcv1a1.Webhook{}}, "spec.hooks.sync.webhook: set url or service"},
		{webhookSpec("ftp://x"), `spec.hooks.sync.webhook.url: "ftp://x" is not an http(s) URL`},
		{&mcv1a1.Hook{Webhook: &mcv1a1.Webhook{URL: ptr.To("http://h"),
			Authorization: &mcv1a1.AuthorizationConfig{SecretRef: mcv1a1.KeySelector{Name: "a", Namespace: "b", Key: "c"}},
			BasicAuth:     &mcv1a1.BasicAuthConfig{SecretRef: mcv1a1.SecretReference{Name: "a", Namespace: "b"}}}},
			"spec.hooks.sync.webhook: authorization and basicAuth are mutually exclusive"},
		{&mcv1a1.Hook{Webhook: &mcv1a1.Webhook{URL: ptr.To("http://h"), CABundle: &mcv1a1.CABundleConfig{Inline: &bad}}},
			"spec.hooks.sync.webhook.caBundle.inline: no PEM certificate found"},
		{&mcv1a1.Hook{Pipeline: &apiextensionsv1.JSON{Raw: []byte(`{"@frobnicate": 1}`)}},
			`spec.hooks.sync.pipeline`},
	} {
		_, err := New(tc.spec, Options{Path: "spec.hooks.sync"})
		if err == nil || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("error %v, want %q", err, tc.errPart)
		}
	}
	svc := &mcv1a1.Hook{Webhook: &mcv1a1.Webhook{Service: &mcv1a1.ServiceReference{Name: "hooks", Namespace: "mc", Port: ptr.To(int32(8080))}, Path: ptr.To("sync")}}
	c, err := New(svc, Options{Path: "p"})
	if err != nil || c.(*webhook).url != "http://hooks.mc:8080/sync" {
		t.Errorf("service URL: %v %v", err, c)
	}
}

func TestPipelineHook(t *testing.T) {
	spec := &mcv1a1.Hook{Pipeline: &apiextensionsv1.JSON{Raw: []byte(`{
		"status": {"replicas": "$.parent.spec.replicas"},
		"children": [{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": {"name": {"@concat": ["$.parent.metadata.name", "-cm"]}},
			"data": {"replicas": {"@string": "$.parent.spec.replicas"}}}]}`)}}
	c, err := New(spec, Options{Controller: "compositecontroller/p", Hook: "sync", Path: "spec.hooks.sync"})
	if err != nil {
		t.Fatal(err)
	}
	var resp hookapi.CompositeResponse
	if err := c.Call(context.Background(), "", request(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status["replicas"] != int64(2) || len(resp.Children) != 1 ||
		resp.Children[0]["metadata"].(map[string]any)["name"] != "a-cm" ||
		resp.Children[0]["data"].(map[string]any)["replicas"] != "2" {
		t.Errorf("response %+v", resp)
	}
	// Integers past 2^53 stay exact, as in an Operator's pipeline.
	big := request()
	big.Parent.Object["spec"] = map[string]any{"replicas": int64(9007199254740993), "max": int64(9223372036854775807)}
	if err := c.Call(context.Background(), "", big, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status["replicas"] != int64(9007199254740993) || resp.Children[0]["data"].(map[string]any)["replicas"] != "9007199254740993" {
		t.Errorf("integer 2^53+1: status %v, child data %v", resp.Status, resp.Children[0]["data"])
	}
	bad, _ := New(&mcv1a1.Hook{Pipeline: &apiextensionsv1.JSON{Raw: []byte(`"$.parent.spec.replicas"`)}}, Options{Path: "spec.hooks.sync"})
	if err := bad.Call(context.Background(), "", request(), &resp); ReasonOf(err) != ReasonInvalidResponse {
		t.Errorf("non-object result: %v", err)
	}
}
