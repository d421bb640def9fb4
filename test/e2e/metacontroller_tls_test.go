package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPKI is a private CA with one server and one client certificate.
type testPKI struct {
	caPEM, serverCert, serverKey, clientCert, clientKey []byte
	pool                                                *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	encKey := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e hook CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), encKey(k)
	}
	p := &testPKI{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serverCert, p.serverKey = issue(2, "hook", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = issue(3, "dcontroller", x509.ExtKeyUsageClientAuth, nil)
	return p
}

// TestMetacontrollerEndpointConfigMutualTLS: a hook behind mutual TLS and
// HTTP Basic authentication, whose settings come from the controller's
// spec.endpointConfigs entry for its host: the CA from a ConfigMap, the
// client certificate and the Basic credentials from Secrets.
func TestMetacontrollerEndpointConfigMutualTLS(t *testing.T) {
	const ns = "e2e-mc-mtls"
	pki := newTestPKI(t)
	var mu sync.Mutex
	var clients, users []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		mu.Lock()
		if len(r.TLS.PeerCertificates) > 0 {
			clients = append(clients, r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		users = append(users, user)
		mu.Unlock()
		if !ok || user != "hook-user" || pass != "hook-pass" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		_ = json.NewEncoder(w).Encode(map[string]any{"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": str(path(req, "parent.metadata.name")) + "-secure"},
			"data":     map[string]any{"tls": "mutual"}}}})
	}))
	cert, err := tls.X509KeyPair(pki.serverCert, pki.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.pool}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")

	installCRD(t, "SecureThing", "securethings", "Namespaced")
	mustKubectl(t, "", "create", "namespace", ns)
	mustKubectl(t, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: hook-ca, namespace: %[1]s}
data:
  ca.crt: |
%[2]s
---
apiVersion: v1
kind: Secret
metadata: {name: hook-client, namespace: %[1]s}
type: kubernetes.io/tls
stringData:
  tls.crt: |
%[3]s
  tls.key: |
%[4]s
---
apiVersion: v1
kind: Secret
metadata: {name: hook-basic, namespace: %[1]s}
stringData: {username: hook-user, password: hook-pass}
`, ns, indent(string(pki.caPEM), "    "), indent(string(pki.clientCert), "    "), indent(string(pki.clientKey), "    ")), "apply", "-f", "-")
	startManager(t)
	applyMC(t, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: secure-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.dcontroller.io/v1, resource: securethings}
  childResources:
    - {apiVersion: v1, resource: configmaps}
  endpointConfigs:
    - host: other.example.com
    - host: %[1]s
      caBundle:
        configMapRef: {name: hook-ca, namespace: %[2]s}
      clientTLS:
        secretRef: {name: hook-client, namespace: %[2]s}
      basicAuth:
        secretRef: {name: hook-basic, namespace: %[2]s}
  hooks:
    sync:
      webhook: {url: %[3]s/sync}
`, host, ns, srv.URL))
	mustKubectl(t, "apiVersion: e2e.dcontroller.io/v1\nkind: SecureThing\nmetadata: {name: s1, namespace: "+ns+"}\n", "apply", "-f", "-")
	eventually(t, 30*time.Second, func() string {
		if v, err := cmData(t, ns, "s1-secure", "tls"); err != nil || v != "mutual" {
			return fmt.Sprintf("s1-secure %q (%v)", v, err)
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	for i := range users {
		if users[i] != "hook-user" || clients[i] != "dcontroller" {
			t.Errorf("call %d: user %q client certificate %q", i, users[i], clients[i])
		}
	}
}
