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
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

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
