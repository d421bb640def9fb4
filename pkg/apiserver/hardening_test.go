package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/auth"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// send makes one request with optional Host and Origin headers and returns
// the status code and the body decoded as a metav1.Status.
func send(t *testing.T, c *http.Client, method, url, host, origin, body string) (int, status) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var st status
	_ = json.Unmarshal(b, &st)
	st.raw = string(b)
	return resp.StatusCode, st
}

type status struct {
	Kind    string `json:"kind"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Details *struct {
		Causes []struct {
			Field string `json:"field"`
		} `json:"causes"`
	} `json:"details"`
	raw string
}

func TestHostNames(t *testing.T) {
	f, err := newHostFilter(append(append([]string{}, DefaultAcceptHosts...), `dev\.example`, `.*\.internal`, `Upper\.Example`))
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8443": true, "LOCALHOST:1": true, "localhost.:8443": true,
		"127.0.0.1": true, "127.0.0.1:8443": true, "[::1]:8443": true, "[::1]": true,
		"dev.example:80": true, "a.b.internal": true, "upper.example": true, "UPPER.example:1": true,
		"attacker.example": false, "localhost.attacker.example": false, "127.0.0.1.nip.io:8443": false,
		"devxexample": false, "dev.example.attacker": false, "": false, "10.0.0.1:8443": false,
	} {
		if got := f.accepts(hostName(host)); got != want {
			t.Errorf("Host %q accepted=%v, want %v", host, got, want)
		}
	}
	if _, err := newHostFilter([]string{"("}); err == nil {
		t.Error("a bad pattern is accepted")
	}
	// A pattern with a port could never match: refused.
	if _, err := newHostFilter([]string{`dc\.example\.com:18444`}); err == nil || !strings.Contains(err.Error(), "without the port") {
		t.Errorf("a pattern with a port: %v", err)
	}
	if _, err := newHostFilter([]string{`::1`, `fe80::1`}); err != nil {
		t.Errorf("IPv6 patterns refused: %v", err)
	}
}

func summaryJSON(name string) string {
	b, _ := json.Marshal(map[string]any{"apiVersion": "op.view.dcontroller.io/v1alpha1", "kind": "Summary", "metadata": map[string]any{"name": name}})
	return string(b)
}

// TestDevelopmentHostCheck: the unauthenticated development server refuses
// requests a DNS-rebinding web page makes (a foreign Host, or a foreign
// Origin) with 403 and a Status, and accepts loopback names and the extra
// accepted hosts.
func TestDevelopmentHostCheck(t *testing.T) {
	store := view.NewStore()
	kinds := func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }
	s, base := testServer(t, store, Options{Kinds: kinds, AcceptHosts: []string{`dev\.example`}})
	_, port, _ := strings.Cut(s.Addr(), ":")
	url := base + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/kube-system/summaries"
	for i, tc := range []struct {
		host, origin string
		want         int
	}{
		{"attacker.example", "", 403},
		{"attacker.example:" + port, "", 403},
		{"", "http://attacker.example:" + port, 403},
		{"", "null", 403},
		{"localhost:" + port, "http://attacker.example", 403},
		{"", "", 201},
		{"localhost:" + port, "", 201},
		{"localhost:" + port, "http://localhost:" + port, 201},
		{"[::1]:" + port, "", 201},
		{"dev.example:" + port, "https://dev.example", 201},
	} {
		code, st := send(t, http.DefaultClient, "POST", url, tc.host, tc.origin, summaryJSON(strings.Repeat("x", i+1)))
		if code != tc.want {
			t.Errorf("Host %q Origin %q: %d, want %d: %s", tc.host, tc.origin, code, tc.want, st.raw)
			continue
		}
		if code == 403 && (st.Kind != "Status" || st.Reason != "Forbidden" || !strings.Contains(st.Message, "not accepted")) {
			t.Errorf("Host %q Origin %q: refusal is not a Forbidden Status: %s", tc.host, tc.origin, st.raw)
		}
	}
	if n := len(store.List(summaryGVK)); n != 5 {
		t.Errorf("%d objects created, want 5", n)
	}
}

// TestCreateValidatesLikeCustomResources: labels and annotations are
// checked as kube-apiserver checks a custom resource's, names by the view
// rule (object.ValidateViewName): 422 Invalid with field paths. A name
// with upper case and punctuation is valid and can be read back.
func TestCreateValidatesLikeCustomResources(t *testing.T) {
	kinds := func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }
	_, base := testServer(t, view.NewStore(), Options{Kinds: kinds})
	url := base + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries"
	for body, field := range map[string]string{
		summaryJSON("a/b"):                    "metadata.name",
		summaryJSON("a%b"):                    "metadata.name",
		summaryJSON(".."):                     "metadata.name",
		summaryJSON(strings.Repeat("a", 254)): "metadata.name",
		`{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Summary","metadata":{"name":"a","labels":{"a":"b c"}}}`:     "metadata.labels",
		`{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Summary","metadata":{"name":"a","annotations":{"/x":"y"}}}`: "metadata.annotations",
	} {
		code, st := send(t, http.DefaultClient, "POST", url, "", "", body)
		if code != 422 || st.Reason != "Invalid" || st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != field {
			t.Errorf("%s: %d %s, want 422 Invalid at %s", body, code, st.raw, field)
		}
	}
	// A field of the wrong type does not decode: 400, as kube-apiserver
	// answers.
	code, st := send(t, http.DefaultClient, "POST", url, "", "", `{"apiVersion":"op.view.dcontroller.io/v1alpha1","kind":"Summary","metadata":{"name":"a","labels":["a"]}}`)
	if code != 400 || st.Reason != "BadRequest" || !strings.Contains(st.Message, "ObjectMeta.labels") {
		t.Errorf("labels as a list: %d %s", code, st.raw)
	}
	for _, name := range []string{"good.name-1", "web-TCP-80", "Bad_Name!:x", "a b?c#d;e", "Ünï", strings.Repeat("A", 253)} {
		if code, st := send(t, http.DefaultClient, "POST", url, "", "", summaryJSON(name)); code != 201 {
			t.Errorf("valid name %q: %d %s", name, code, st.raw)
		}
		if code, st := send(t, http.DefaultClient, "GET", url+"/"+neturl.PathEscape(name), "", "", ""); code != 200 || !strings.Contains(st.raw, `"name":"`+name+`"`) {
			t.Errorf("get %q: %d %s", name, code, st.raw)
		}
	}
}

// TestReadyWhenExpectedKindsServed: /readyz fails (check views-served)
// until every expected kind is in discovery, and while the expected kinds
// are not known.
func TestReadyWhenExpectedKindsServed(t *testing.T) {
	var serve, known atomic.Bool
	kinds := func() []schema.GroupVersionKind {
		if serve.Load() {
			return []schema.GroupVersionKind{summaryGVK}
		}
		return nil
	}
	expected := func(context.Context) ([]schema.GroupVersionKind, error) {
		if !known.Load() {
			return nil, os.ErrNotExist
		}
		return []schema.GroupVersionKind{summaryGVK, {Group: "apps", Version: "v1", Kind: "Deployment"}}, nil
	}
	_, base := testServer(t, view.NewStore(), Options{Kinds: kinds, ExpectedKinds: expected, SyncInterval: time.Hour})
	readyz := func() (int, string) { return get(t, base+"/readyz?verbose", "") }
	if code, body := readyz(); code == 200 || !strings.Contains(body, "[-]views-served failed") {
		t.Errorf("ready while the expected kinds are unknown: %d\n%s", code, body)
	}
	known.Store(true)
	if code, body := readyz(); code == 200 {
		t.Errorf("ready before Summary is served: %d\n%s", code, body)
	}
	serve.Store(true)
	// The failing check asks for a sync; the next probe passes.
	waitFor(t, "ready", func() bool { code, _ := readyz(); return code == 200 })
	if code, body := get(t, base+"/apis/op.view.dcontroller.io/v1alpha1", ""); code != 200 || !strings.Contains(body, `"summaries"`) {
		t.Errorf("ready but not in discovery: %d %s", code, body)
	}
	if _, body := readyz(); !strings.Contains(body, "[+]views-served ok") {
		t.Errorf("readyz:\n%s", body)
	}
}

// TestViewsServedCheck: the check a manager adds to its /readyz fails
// while an expected kind is not in discovery (before the server runs too),
// and passes once it is.
func TestViewsServedCheck(t *testing.T) {
	var serve atomic.Bool
	kinds := func() []schema.GroupVersionKind {
		if serve.Load() {
			return []schema.GroupVersionKind{summaryGVK}
		}
		return nil
	}
	expected := func(context.Context) ([]schema.GroupVersionKind, error) {
		return []schema.GroupVersionKind{summaryGVK}, nil
	}
	s, err := New(Options{Addr: "127.0.0.1:0", Store: view.NewStore(), Kinds: kinds, ExpectedKinds: expected, SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := s.ViewsServed(req); err == nil {
		t.Errorf("ready before the server runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	if err := s.ViewsServed(req); err == nil || !strings.Contains(err.Error(), "Summary") {
		t.Errorf("running, Summary not served: %v", err)
	}
	serve.Store(true)
	waitFor(t, "ready", func() bool { return s.ViewsServed(req) == nil })
}

// TestProductionPublicPaths: health, readiness and version answer without
// a token, as kube-apiserver's do; everything else, and a bad token on
// those paths, is 401. The server is on loopback, so Hosts are checked.
func TestProductionPublicPaths(t *testing.T) {
	certPEM, _, certFile, keyFile := productionKeys(t)
	s := runServer(t, Options{Addr: "127.0.0.1:0", Mode: Production, CertFile: certFile, KeyFile: keyFile, Store: view.NewStore()})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + s.Addr()
	waitFor(t, "ready without a token", func() bool {
		resp, err := c.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, p := range PublicPaths {
		if code, st := send(t, c, "GET", base+p, "", "", ""); code != 200 {
			t.Errorf("GET %s without a token: %d %s", p, code, st.raw)
		}
	}
	for _, p := range []string{"/apis", "/api", "/openapi/v2", "/readyz/ping", "/healthz/log", "/apis/op.view.dcontroller.io/v1alpha1/summaries"} {
		if code, st := send(t, c, "GET", base+p, "", "", ""); code != 401 {
			t.Errorf("GET %s without a token: %d %s", p, code, st.raw)
		}
	}
	req, _ := http.NewRequest("GET", base+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("/readyz with a bad token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if code, st := send(t, c, "GET", base+"/healthz", "attacker.example", "", ""); code != 403 {
		t.Errorf("foreign Host on a loopback production server: %d %s", code, st.raw)
	}
}

// productionKeys writes a fresh ECDSA certificate (for localhost and
// 127.0.0.1) and its key into a test directory, as dctl generate-keys does.
func productionKeys(t *testing.T) (certPEM, keyPEM []byte, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certPEM, keyPEM, err := auth.GenerateKeys(auth.KeyOptions{Hostnames: []string{"localhost", "127.0.0.1"}, Type: auth.ECDSA})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, certFile, keyFile
}

// runServer builds a server and runs it until the test ends; an error of
// Run fails the test.
func runServer(t testing.TB, opts Options) *Server {
	t.Helper()
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
	return s
}
