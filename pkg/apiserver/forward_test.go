package apiserver

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcontroller/dcontroller/pkg/auth"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// TestForwardToMember: a member answers for the views of an operator that
// runs on another member by forwarding get, list and watch to it; with no
// member, an unreachable one, or a request that was already forwarded, it
// answers 503 with Retry-After.
func TestForwardToMember(t *testing.T) {
	kinds := func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }
	owner := view.NewStore()
	if _, err := owner.Create(summary("default", "a", map[string]any{"k": "from-b"})); err != nil {
		t.Fatal(err)
	}
	b, _ := testServer(t, owner, Options{Kinds: kinds})
	route := Route{Member: "b", Address: b.Addr()}
	_, base := testServer(t, view.NewStore(), Options{Kinds: kinds, Member: "a",
		Route: func(op, _ string) Route {
			if op != "op" {
				return Route{Local: true}
			}
			return route
		}})
	url := base + "/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries"

	if code, body := get(t, url+"/a", "application/json"); code != 200 || !strings.Contains(body, "from-b") {
		t.Fatalf("get through a member: %d %s", code, body)
	}
	if code, body := get(t, url, "application/json"); code != 200 || !strings.Contains(body, `"name":"a"`) {
		t.Fatalf("list through a member: %d %s", code, body)
	}

	// A watch streams the owner's events as they happen.
	resp, err := http.Get(url + "?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"ADDED"`) {
		t.Fatalf("first watch event: %q", lines.Text())
	}
	if _, err := owner.Create(summary("default", "later", map[string]any{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || !strings.Contains(lines.Text(), `"later"`) {
		t.Fatalf("streamed watch event: %q", lines.Text())
	}

	check503 := func(what string, req *http.Request, want string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		body.Write(buf[:n])
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body.String(), want) {
			t.Errorf("%s: %d Retry-After=%q %s (want 503 mentioning %q)", what, resp.StatusCode, resp.Header.Get("Retry-After"), body.String(), want)
		}
	}
	req, _ := http.NewRequest("GET", url+"/a", nil)
	req.Header.Set(ForwardedHeader, "c")
	check503("a forwarded request", req, "handed over")

	route = Route{}
	req, _ = http.NewRequest("GET", url+"/a", nil)
	check503("no member", req, "handed over")

	// A holder whose published address leads back here: the request
	// comes back forwarded by this member, and is refused for good.
	route = Route{Member: "b", Address: strings.TrimPrefix(base, "http://")}
	if code, body := get(t, url+"/a", "application/json"); code != 500 || !strings.Contains(body, "leads back to member a: check --sharding-address of b") {
		t.Errorf("an address leading back: %d %s", code, body)
	}

	route = Route{Member: "b"}
	req, _ = http.NewRequest("GET", url+"/a", nil)
	check503("no address", req, "--sharding-address")

	route = Route{Split: true}
	if code, body := get(t, url, "application/json"); code != 400 || !strings.Contains(body, "split by namespace") {
		t.Errorf("a cluster-wide list of namespace-split views: %d %s", code, body)
	}

	route = Route{Member: "b", Address: "127.0.0.1:1"}
	req, _ = http.NewRequest("GET", url+"/a", nil)
	check503("unreachable member", req, "did not answer")
}

// TestForwardPinsCertificate: in production mode a member forwards only
// to a server presenting the ring's own certificate.
func TestForwardPinsCertificate(t *testing.T) {
	dir := t.TempDir()
	own := selfSigned(t)
	certFile := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := newForwarder(Options{Mode: Production, CertFile: certFile})
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: f.transport, Timeout: 10 * time.Second}

	same := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	same.TLS = &tls.Config{Certificates: []tls.Certificate{own}}
	same.StartTLS()
	defer same.Close()
	resp, err := c.Get(same.URL)
	if err != nil {
		t.Fatalf("a member with the ring's certificate: %v", err)
	}
	resp.Body.Close()

	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer other.Close()
	if resp, err := c.Get(other.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a server with another certificate was trusted")
	} else if !strings.Contains(err.Error(), "ring's certificate") {
		t.Fatalf("unexpected error: %v", err)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ring"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestForwardProductionCredentials: in production mode a member forwards a
// request with the client's bearer token, so the member holding the views
// authenticates and authorizes the client itself: a token granting the
// views reads them through either member, a token granting nothing is
// refused (403) by the holder, and no token is refused (401) before any
// forwarding.
func TestForwardProductionCredentials(t *testing.T) {
	certPEM, keyPEM, certFile, keyFile := productionKeys(t)
	key, err := auth.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }
	start := func(store *view.Store, opts Options) *Server {
		t.Helper()
		opts.Addr, opts.Mode, opts.CertFile, opts.KeyFile, opts.Store, opts.Kinds = "127.0.0.1:0", Production, certFile, keyFile, store, kinds
		return runServer(t, opts)
	}
	owner := view.NewStore()
	if _, err := owner.Create(summary("default", "a", map[string]any{"k": "from-b"})); err != nil {
		t.Fatal(err)
	}
	b := start(owner, Options{Member: "b", Route: func(string, string) Route { return Route{Local: true} }})
	a := start(view.NewStore(), Options{Member: "a", Route: func(op, _ string) Route {
		if op != "op" {
			return Route{Local: true}
		}
		return Route{Member: "b", Address: b.Addr()}
	}})

	token := func(rules []rbacv1.PolicyRule) string {
		t.Helper()
		tok, err := auth.IssueToken(key, auth.Claims{Username: "alice", Namespaces: []string{auth.AllNamespaces}, Rules: rules,
			RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	reader := token([]rbacv1.PolicyRule{{APIGroups: []string{"op.view.dcontroller.io"}, Resources: []string{"summaries"}, Verbs: []string{"get", "list"}}})
	nobody := token(nil)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(base, tok, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+base+path, nil)
		req.Header.Set("Accept", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	path := "/apis/op.view.dcontroller.io/v1alpha1/namespaces/default/summaries"
	waitFor(t, "both members serve the views", func() bool {
		ca, _ := do(a.Addr(), reader, path+"/a")
		cb, _ := do(b.Addr(), reader, path+"/a")
		return ca == 200 && cb == 200
	})
	if code, body := do(a.Addr(), reader, path+"/a"); code != 200 || !strings.Contains(body, "from-b") {
		t.Errorf("get through the other member: %d %s", code, body)
	}
	if code, body := do(a.Addr(), reader, path); code != 200 || !strings.Contains(body, `"name":"a"`) {
		t.Errorf("list through the other member: %d %s", code, body)
	}
	if code, body := do(a.Addr(), nobody, path+"/a"); code != 403 {
		t.Errorf("a token granting nothing, through the other member: %d %s", code, body)
	}
	if code, body := do(a.Addr(), "", path+"/a"); code != 401 {
		t.Errorf("no token, through the other member: %d %s", code, body)
	}
}
