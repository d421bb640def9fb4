package hook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcv1a1 "github.com/dcontroller/dcontroller/api/metacontroller/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/metacontroller/hookapi"
)

// emptyChildren returns an answer of about size bytes:
// {"children":[{},{},...]}, the answer that decodes to the most memory per
// byte of the response types.
func emptyChildren(size int) []byte {
	var b bytes.Buffer
	b.Grow(size + 16)
	b.WriteString(`{"children":[{}`)
	for b.Len() < size {
		b.WriteString(`,{}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// memUse calls f while sampling the heap every millisecond; it returns
// the bytes f allocated (TotalAlloc) and the peak heap in use above the
// heap before f.
func memUse(f func()) (alloc, peak uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var max atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > max.Load() {
				max.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if max.Load() > before.HeapInuse {
		peak = max.Load() - before.HeapInuse
	}
	return after.TotalAlloc - before.TotalAlloc, peak
}

// TestWebhookHostileAnswerMemory: an answer of 20 or 63 MiB of empty
// children (under the 64 MiB body bound) is refused before it is decoded,
// and the call allocates a small multiple of the body (reading it), not
// the gigabytes decoding it would take.
func TestWebhookHostileAnswerMemory(t *testing.T) {
	for _, mib := range []int{20, 63} {
		t.Run(fmt.Sprintf("%dMiB", mib), func(t *testing.T) {
			body := emptyChildren(mib << 20)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			c, err := New(webhookSpec(srv.URL), Options{Controller: "compositecontroller/mem", Hook: "sync", Path: "spec.hooks.sync"})
			if err != nil {
				t.Fatal(err)
			}
			var callErr error
			alloc, peak := memUse(func() {
				var resp hookapi.CompositeResponse
				callErr = c.Call(context.Background(), "", request(), &resp)
			})
			t.Logf("%d MiB answer: allocated %d MiB, peak heap +%d MiB", mib, alloc>>20, peak>>20)
			if ReasonOf(callErr) != ReasonInvalidResponse || !strings.Contains(callErr.Error(), "children: more than 10000 elements (--hook-max-objects)") {
				t.Errorf("error %v, want InvalidResponse over --hook-max-objects", callErr)
			}
			if limit := uint64(4 * len(body)); alloc > limit {
				t.Errorf("the call allocated %d MiB for a %d MiB answer, want under %d MiB", alloc>>20, mib, limit>>20)
			}
		})
	}
}

// TestWebhookResponseBytes: Limits.ResponseBytes bounds the body, whether
// its Content-Length announces it or not; a body at the bound is read.
func TestWebhookResponseBytes(t *testing.T) {
	answer := `{"status":{"pad":"` + strings.Repeat("x", 100) + `"}}`
	for _, tc := range []struct {
		name    string
		limit   int64
		chunked bool
		err     string
	}{
		{name: "announced, over", limit: int64(len(answer)) - 1, err: fmt.Sprintf("larger than %d bytes (--hook-max-response-bytes)", len(answer)-1)},
		{name: "chunked, over", limit: int64(len(answer)) - 1, chunked: true, err: "larger than"},
		{name: "announced, at the bound", limit: int64(len(answer))},
		{name: "chunked, at the bound", limit: int64(len(answer)), chunked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if !tc.chunked {
					w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
				}
				_, _ = io.WriteString(w, answer)
				w.(http.Flusher).Flush()
			}))
			defer srv.Close()
			c, err := New(webhookSpec(srv.URL), Options{Path: "spec.hooks.sync", Limits: Limits{ResponseBytes: tc.limit}})
			if err != nil {
				t.Fatal(err)
			}
			var resp hookapi.CompositeResponse
			err = c.Call(context.Background(), "", request(), &resp)
			if tc.err == "" && err != nil || tc.err != "" && (ReasonOf(err) != ReasonInvalidResponse || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestLimitsCheck(t *testing.T) {
	small := Limits{Objects: 3, ObjectBytes: 40, Values: 30, Depth: 5}
	for _, tc := range []struct {
		name, body string
		limits     Limits
		err        string
	}{
		{name: "ordinary answer", body: `{"status":{"a":1},"children":[{"kind":"Pod","metadata":{"name":"x"}}],"resyncAfterSeconds":2}`, limits: small},
		{name: "children at the bound", body: `{"children":[{},{},{}]}`, limits: small},
		{name: "children over", body: `{"children":[{},{},{},{}]}`, limits: small, err: "children: more than 3 elements (--hook-max-objects)"},
		{name: "attachments over", body: `{"attachments":[{},{},{},{}]}`, limits: small, err: "attachments: more than 3 elements"},
		{name: "related rules over", body: `{"relatedResources":[{},{},{},{}]}`, limits: small, err: "relatedResources: more than 3 elements"},
		{name: "escaped key", body: `{"childr\u0065n":[{},{},{},{}]}`, limits: small, err: "children: more than 3 elements"},
		{name: "child too large", body: `{"children":[{},{"pad":"` + strings.Repeat("x", 40) + `"}]}`, limits: small,
			err: "children[1]: 50 bytes of JSON, more than 40 (--hook-max-object-bytes)"},
		{name: "status too large", body: `{"status":{"pad":"` + strings.Repeat("x", 40) + `"}}`, limits: small, err: "status: 50 bytes of JSON, more than 40"},
		{name: "values", body: `{"status":{"a":[` + strings.Repeat("1,", 30) + `1]}}`, limits: small, err: "more than 30 JSON values and keys in the answer (--hook-max-values)"},
		{name: "depth", body: `{"status":{"a":{"b":{"c":{"d":{}}}}}}`, limits: small, err: "nested more than 5 deep (--hook-max-depth)"},
		{name: "depth in a child", body: `{"children":[{"a":{"b":{"c":{}}}}]}`, limits: small, err: "children[0]: objects and arrays nested more than 5 deep"},
		{name: "depth at the bound", body: `{"status":{"a":{"b":{"c":{}}}}}`, limits: small},
		{name: "strings with escapes and brackets", body: `{"status":{"a":"]}\"{[\\"}}`, limits: small},
		{name: "malformed is the decoder's", body: `{"children":[{},{"a" 1}]}`, limits: small},
		{name: "defaults", body: string(emptyChildren(1 << 20)), err: "children: more than 10000 elements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limits.Check([]byte(tc.body))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("Check: %v, want %q", err, tc.err)
			}
		})
	}
}

// TestLimitsCountsValues: every value and key counts once, whatever its
// type.
func TestLimitsCountsValues(t *testing.T) {
	body := `{"status":{"a":[1,true,null,"x",{"b":-2.5e3}],"c":{}},"children":[{"k":"v"}],"finalized":false}`
	// 14 values: the answer, status, a's array, 1, true, null, "x",
	// {"b":...}, -2.5e3, c's {}, children's array, {"k":...}, "v", false;
	// 7 keys: status, a, b, c, children, k, finalized.
	if err := (Limits{Values: 21}).Check([]byte(body)); err != nil {
		t.Errorf("21 values and keys refused: %v", err)
	}
	if err := (Limits{Values: 20}).Check([]byte(body)); err == nil {
		t.Error("21 values and keys passed a bound of 20")
	}
}

// TestPipelineHookLimits: an inline pipeline's answer is bounded too.
func TestPipelineHookLimits(t *testing.T) {
	c, err := New(&mcv1a1.Hook{Pipeline: &apiextensionsv1.JSON{Raw: []byte(`{"children":[{"a":1},{"a":2},{"a":3}]}`)}},
		Options{Path: "spec.hooks.sync", Limits: Limits{Objects: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var resp hookapi.CompositeResponse
	err = c.Call(context.Background(), "", request(), &resp)
	if ReasonOf(err) != ReasonInvalidResponse || !strings.Contains(err.Error(), "children: more than 2 elements") {
		t.Errorf("error %v, want InvalidResponse over the children bound", err)
	}
}

// secretReader serves one Secret (the hook's token) to the webhook.
type secretReader struct{ secret *corev1.Secret }

func (s secretReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if key.Namespace != s.secret.Namespace || key.Name != s.secret.Name {
		return fmt.Errorf("no Secret %s", key)
	}
	s.secret.DeepCopyInto(obj.(*corev1.Secret))
	return nil
}

func (secretReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("not served")
}

// TestWebhookRedirectRefused: a hook that answers with a redirect to
// another port of the same host fails the call with the Location in the
// error, and the other server receives nothing: neither the body nor the
// hook's Bearer token.
func TestWebhookRedirectRefused(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusFound, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var stolen atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				stolen.Add(1)
				t.Logf("the redirect target got %s with Authorization %q", r.Method, r.Header.Get("Authorization"))
				_, _ = io.WriteString(w, `{"children":[]}`)
			}))
			defer other.Close()
			var calls atomic.Int32
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if r.Header.Get("Authorization") != "Bearer s3cret" {
					t.Errorf("the hook got Authorization %q", r.Header.Get("Authorization"))
				}
				http.Redirect(w, r, other.URL+"/steal", status)
			}))
			defer hook.Close()
			spec := webhookSpec(hook.URL)
			spec.Webhook.Authorization = &mcv1a1.AuthorizationConfig{SecretRef: mcv1a1.KeySelector{Namespace: "ns", Name: "tok", Key: "token"}}
			c, err := New(spec, Options{Path: "spec.hooks.sync", Reader: secretReader{&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tok"}, Data: map[string][]byte{"token": []byte("s3cret\n")}}}})
			if err != nil {
				t.Fatal(err)
			}
			var resp hookapi.CompositeResponse
			err = c.Call(context.Background(), "", request(), &resp)
			want := fmt.Sprintf("status %d: redirect to %q refused", status, other.URL+"/steal")
			if ReasonOf(err) != ReasonInvalidResponse || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want InvalidResponse and %q", err, want)
			}
			if calls.Load() != 1 || stolen.Load() != 0 {
				t.Errorf("the hook got %d requests, the redirect target %d; want 1 and 0", calls.Load(), stolen.Load())
			}
		})
	}
}

// TestDecodeAtTheValuesBound: an answer just within the default limits,
// made of the values that cost the decoder most (empty objects), decodes
// to about 100 MiB (DefaultValues' docstring).
func TestDecodeAtTheValuesBound(t *testing.T) {
	child := `{"a":[` + strings.Repeat("{},", 102) + `{}]}` // 106 values and keys
	body := []byte(`{"children":[` + strings.Repeat(child+",", DefaultValues/106-1) + child + `]}`)
	if err := (Limits{}).Check(body); err != nil {
		t.Fatalf("the answer is over the default limits: %v", err)
	}
	alloc, peak := memUse(func() {
		var resp hookapi.CompositeResponse
		if err := hookapi.Decode(body, false, &resp); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%d KiB answer of %d values: allocated %d MiB, peak heap +%d MiB", len(body)>>10, DefaultValues, alloc>>20, peak>>20)
	if alloc > 128<<20 {
		t.Errorf("decoding allocated %d MiB, want under 128 MiB", alloc>>20)
	}
}
